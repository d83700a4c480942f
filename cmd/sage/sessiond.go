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
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sessiond"
)

// daemonFlags are the flags of `sage exec` that talk to a session daemon.
type daemonFlags struct {
	background bool
	idle       optDuration
}

func (d *daemonFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&d.background, "background", false, "with --session: start the command as a background task of the session and print its id")
	fs.Var(&d.idle, "idle-timeout", "with --session: stop the session's daemon after this `duration` without a command (default 15m, 0 = never)")
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

// execInDaemon runs `sage exec` through the session's daemon.
func execInDaemon(ctx context.Context, env *cliEnv, name string, cfg sandbox.Config, df daemonFlags,
	opts sandbox.ExecOptions, command string, asJSON bool) int {
	cfg = daemonConfig(cfg)
	so, err := startOptions(env, name, cfg, df.idle.or(sessiond.DefaultIdleTimeout))
	if err != nil {
		return fail(env, exitSandboxError, err)
	}
	timeout := sandbox.CommandTimeout(0, cfg.Timeout)
	req := sessiond.Request{Op: sessiond.OpExec, Settings: sessiond.Fingerprint(cfg), Command: command,
		Env: opts.Env, Timeout: timeout, Stream: !asJSON, Stdin: opts.Stdin != nil}
	if df.idle.set {
		req.IdleTimeout = &df.idle.d
	}
	if df.background {
		req.Op = sessiond.OpBackground
	}
	r, err := sessiond.Run(ctx, so, req, sessiond.Streams{Stdin: opts.Stdin, Stdout: env.stdout, Stderr: env.stderr})
	if errors.Is(err, sessiond.ErrSettings) {
		return fail(env, exitUsage, badSetting("%v", err))
	}
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

func printJSON(env *cliEnv, v any) int {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(env, exitSandboxError, err)
	}
	return 0
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
// JSON on stdin and serves the session until stopped or idle.
func serveDaemon(ctx context.Context, env *cliEnv, name string, idle time.Duration) int {
	ready := sessiond.ReadyFile()
	failed := func(err error) int {
		if ready != nil {
			fmt.Fprint(ready, oneLine(err.Error()))
			ready.Close()
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
	h, err := sandbox.New(ctx, cfg)
	if err != nil {
		return failed(err)
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(env.stderr, "%s %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, a...))
	}
	srv := &sessiond.Server{Name: name, Dir: dir, Sandbox: h, Settings: sessiond.Fingerprint(cfg),
		IdleTimeout: idle, Logf: logf}
	if ready != nil {
		srv.Ready = ready
	}
	if err := srv.Serve(ctx); err != nil {
		h.Close(context.WithoutCancel(ctx))
		return failed(err)
	}
	return 0
}
