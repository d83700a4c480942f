package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

// daemonFlags are the flags of `sage exec` that talk to a session daemon.
type daemonFlags struct {
	background bool
	idle       optDuration
}

func (d *daemonFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&d.background, "background", false, "with --session: start the command as a background task of the session and print its id")
	d.registerIdle(fs)
}

// registerIdle registers --idle-timeout alone (sage python, sage fs).
func (d *daemonFlags) registerIdle(fs *flag.FlagSet) {
	fs.Var(&d.idle, "idle-timeout", "with --session: stop the session's daemon after this `duration` without a command (default 15m, 0 = never)")
}

// sessionFlagGiven says whether --session was on the command line.
func sessionFlagGiven(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "session" })
	return given
}

// usesDaemon says whether cfg runs through a session daemon: an explicit
// --session in local mode with the session sandbox (Linux, bwrap or
// gVisor), unless fresh_per_command asks for a fresh sandbox per command.
func usesDaemon(sessionGiven bool, cfg sandbox.Config) bool {
	iso := cfg.Local.Isolation.Linux
	return sessionGiven && cfg.Mode == sandbox.Local && runtime.GOOS == "linux" &&
		iso != sandbox.IsolationNone &&
		(cfg.Local.FreshPerCommand == nil || !*cfg.Local.FreshPerCommand)
}

// daemonConfig is cfg as the daemon opens it: the session sandbox on, its
// own idle stop off (the daemon's idle timeout ends it all).
func daemonConfig(cfg sandbox.Config) sandbox.Config {
	fresh := false
	cfg.Local.FreshPerCommand = &fresh
	cfg.Local.IdleTimeout = -1
	cfg.Observer = nil
	return cfg
}

// startOptions say how `sage exec` reaches session name's daemon, and
// how it starts one: this program as `sage session serve`.
func startOptions(env *cliEnv, name string, cfg sandbox.Config, idle time.Duration) (sessiond.StartOptions, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return sessiond.StartOptions{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return sessiond.StartOptions{}, fmt.Errorf("cannot find this program to start the session daemon: %w", err)
	}
	return sessiond.StartOptions{Home: sandbox.Home(), Name: name, Config: b, Notice: env.stderr,
		Command: func() *exec.Cmd {
			return exec.Command(exe, "session", "serve", "--idle-timeout", idle.String(), name)
		}}, nil
}

// daemonRequest fills in what every request to session name's daemon
// carries (settings, idle timeout) and sends it, starting the daemon when
// none runs. A session started with other settings is a bad setting.
func daemonRequest(ctx context.Context, env *cliEnv, name string, cfg sandbox.Config, idle optDuration,
	req sessiond.Request, st sessiond.Streams) (sessiond.Response, error) {
	cfg = daemonConfig(cfg)
	so, err := startOptions(env, name, cfg, idle.or(sessiond.DefaultIdleTimeout))
	if err != nil {
		return sessiond.Response{}, err
	}
	req.Settings = sessiond.Fingerprint(cfg)
	if idle.set {
		req.IdleTimeout = &idle.d
	}
	r, err := sessiond.Run(ctx, so, req, st)
	switch {
	case errors.Is(err, sessiond.ErrSettings):
		err = badSetting("%s", settingsMismatch(ctx, name, cfg, err))
	case errors.Is(err, sessiond.ErrTooLarge):
		err = badSetting("session %s: the command line, Python code and --env together are over the %d bytes one call carries; fix: write the code into the workspace (sage fs write --session %s prog.py < prog.py) and run it from there", name, sessiond.MaxRequest, name)
	}
	return r, err
}

// execInDaemon runs `sage exec` (and `sage python`, req.Op) through the
// session's daemon.
func execInDaemon(ctx context.Context, env *cliEnv, name string, cfg sandbox.Config, df daemonFlags,
	req sessiond.Request, stdin io.Reader, asJSON bool) int {
	timeout := driver.CommandTimeout(0, cfg.Timeout)
	req.Timeout, req.Stream, req.Stdin = timeout, !asJSON, stdin != nil
	if df.background {
		req.Op = sessiond.OpBackground
	}
	r, err := daemonRequest(ctx, env, name, cfg, df.idle, req,
		sessiond.Streams{Stdin: stdin, Stdout: env.stdout, Stderr: env.stderr})
	if df.background {
		if err != nil {
			return fail(env, exitSandboxError, err)
		}
		if asJSON {
			return printJSON(env, r.Task)
		}
		fmt.Fprintln(env.stdout, r.Task.ID)
		return 0
	}
	if err == nil && r.Result == nil {
		err = fmt.Errorf("session %s: the daemon answered without a result", name)
	}
	if r.Result != nil {
		r.Result.Duration = r.Duration
	}
	return finish(env, r.Result, err, timeout, asJSON)
}

// optDuration is a duration flag that knows whether it was given.
type optDuration struct {
	d   time.Duration
	set bool
}

func (o *optDuration) String() string { return o.d.String() }

func (o *optDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration such as 15m, or 0 for never")
	}
	o.d, o.set = d, true
	return nil
}

func (o optDuration) or(def time.Duration) time.Duration {
	if o.set {
		return o.d
	}
	return def
}

// serveDaemon is `sage session serve`: it reads the sandbox config as
// JSON on stdin and serves the session until stopped or idle. Its
// sandbox's events go to an observability Manager with the handlers of
// its flags and environment (--trace, OTEL_EXPORTER_OTLP_*): one chain
// run per request, and the sandbox's acquire as "sage session serve".
func serveDaemon(ctx context.Context, env *cliEnv, name string, idle time.Duration, trace bool) int {
	ready := sessiond.ReadyFile()
	failed := func(err error) int {
		if ready != nil {
			sessiond.NotReady(ready, err)
		}
		return fail(env, exitSandboxError, err)
	}
	dir, err := sessiond.Dir(sandbox.Home(), name)
	if err != nil {
		return failed(err)
	}
	if pid, ok := sessiond.Serving(dir); ok {
		return failed(fmt.Errorf("session %s is already served by pid %d", name, pid))
	}
	var cfg sandbox.Config
	dec := json.NewDecoder(io.LimitReader(env.stdin, 1<<20))
	if err := dec.Decode(&cfg); err != nil {
		return failed(fmt.Errorf("session %s: read the sandbox config (JSON) on stdin: %w", name, err))
	}
	var handlers []observability.Handler
	if trace {
		handlers = append(handlers, observability.NewConsoleHandler(env.stderr, observability.ConsoleOptions{}))
	}
	obs, shutdown, err := observer(ctx, handlers...)
	if err != nil {
		return failed(err)
	}
	defer shutdown()
	cfg.Observer = obs
	sctx := obs.ChainStart(ctx, observability.ChainInfo{SessionID: name, Name: "sage session serve"})
	h, err := sandbox.New(sctx, cfg)
	if err != nil {
		obs.ChainError(sctx, err)
		return failed(err)
	}
	obs.ChainEnd(sctx, observability.ChainResult{})
	logf := func(format string, a ...any) {
		fmt.Fprintf(env.stderr, "%s %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, a...))
	}
	srv := &sessiond.Server{Name: name, Dir: dir, Sandbox: h, Settings: sessiond.Fingerprint(cfg), Config: &cfg,
		IdleTimeout: idle, Logf: logf, Observer: obs}
	if ready != nil {
		srv.Ready = ready
	}
	if err := srv.Serve(ctx); err != nil {
		h.Close(context.WithoutCancel(ctx))
		return failed(err)
	}
	return 0
}

// configKeys name the sandbox.Config paths a session compares by the
// flag that sets them (the others by their config file key).
var configKeys = map[string]string{
	"Mode": "--mode", "Workspace": "--workspace", "Mounts": "--mount",
	"Local.CPUTimeLimit": "--cpu-time", "Local.MemoryLimitMB": "--memory", "Local.PidsLimit": "--pids",
	"Local.FileSizeLimitMB": "--file-size", "Local.DiskQuotaMB": "--disk-quota", "Local.Network": "--network",
	"Local.AllowedDomains": "--allow-domain", "Local.DeniedDomains": "--deny-domain", "Local.Isolation.Linux": "--isolation",
	"Local.DiskQuotaInodes": "SAGE_LOCAL_DISK_QUOTA_INODES", "Local.UIDRange": "SAGE_LOCAL_UID_RANGE",
	"Local.Umask": "SAGE_LOCAL_UMASK", "Local.SeccompDeny": "SAGE_LOCAL_SECCOMP_DENY",
}

// settingsMismatch says which settings session name runs with that cfg
// asks otherwise, as the daemon describes them (refused: the daemon's
// refusal, said when it cannot describe them).
func settingsMismatch(ctx context.Context, name string, cfg sandbox.Config, refused error) string {
	fix := fmt.Sprintf("fix: sage session stop %s, or give the settings it was started with", name)
	dir, err := sessiond.Dir(sandbox.Home(), name)
	var info *sessiond.Info
	if err == nil {
		info, err = sessiond.Describe(ctx, dir)
	}
	var diffs []sessiond.Difference
	if err == nil && info.Config != nil {
		diffs, err = sessiond.SettingsDiff(info.Config, cfg)
	}
	if err != nil || len(diffs) == 0 {
		return refused.Error()
	}
	parts := make([]string, 0, len(diffs))
	for _, d := range diffs {
		key := configKeys[d.Key]
		if key == "" {
			key = d.Key
		}
		parts = append(parts, fmt.Sprintf("%s is %s in the session, %s in this call", key, d.Session, d.Call))
	}
	if len(parts) > 4 {
		parts = append(parts[:4], fmt.Sprintf("and %d more", len(parts)-4))
	}
	return fmt.Sprintf("session %s runs with other settings: %s; %s", name, strings.Join(parts, ", "), fix)
}
