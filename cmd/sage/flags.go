package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote"
)

// sandboxFlags are the flags every sandbox subcommand shares.
type sandboxFlags struct {
	fs        *flag.FlagSet // the flag set they were registered on
	mode      string
	workspace string
	session   string
	timeout   time.Duration
	mounts    mountList
	env       envList
	limits    limitFlags
	// checkpoints: sandbox.local.checkpoints on (--checkpoints)
	checkpoints bool
	// remote mode: override SAGE_REMOTE_PROVIDER and SAGE_REMOTE_URL
	remoteProvider, remoteURL string
	osbURL, osbKeyEnv         string
}

// limitFlags are local mode's limits; each overrides SAGE_LOCAL_* only
// when given.
type limitFlags struct {
	cpuTime  optSeconds
	memory   optInt
	pids     optInt
	fileSize optInt
	disk     optInt
	network  string
	iso      string
	allow    domainList
	deny     domainList
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.mode, "mode", "", "sandbox `mode`: local, passthrough or remote (default $SAGE_SANDBOX_MODE or local)")
	fs.StringVar(&f.workspace, "workspace", "", "host workspace `directory` (default $SAGE_HOME/sessions/<session>/workspace)")
	fs.StringVar(&f.session, "session", "default", "session `id`: names the sandbox and its default workspace")
	fs.DurationVar(&f.timeout, "timeout", 0, "command timeout (default $SAGE_SANDBOX_TIMEOUT or 30s); exit 124 when it expires")
	fs.Var(&f.mounts, "mount", "extra mount `host:sandbox[:ro]` (repeatable)")
	fs.Var(&f.env, "env", "environment variable `K=V` for the command (repeatable)")
	fs.StringVar(&f.remoteProvider, "remote-provider", "", "remote: the sandbox `provider`, aio (default $SAGE_REMOTE_PROVIDER)")
	fs.StringVar(&f.remoteURL, "remote-url", "", "remote: `URL` of a running sandbox server; without it aio starts one with Docker (default $SAGE_REMOTE_URL)")
	fs.StringVar(&f.osbURL, "opensandbox-url", "", "remote opensandbox: lifecycle server `URL`, e.g. http://host:8080/v1 (default $SAGE_OPENSANDBOX_URL)")
	fs.StringVar(&f.osbKeyEnv, "opensandbox-api-key-env", "", "remote opensandbox: the `variable` holding the API key (default SAGE_OPENSANDBOX_API_KEY)")
	fs.Var(&f.limits.cpuTime, "cpu-time", "local: CPU-time budget of each command, all its processes together, in `seconds` (default none)")
	fs.Var(&f.limits.memory, "memory", "local: memory limit in `MB` (default 2048, -1 for none)")
	fs.Var(&f.limits.pids, "pids", "local: process `limit` (default 512, -1 for none)")
	fs.Var(&f.limits.fileSize, "file-size", "local: largest file a command may write, in `MB` (default 1024, -1 for none)")
	fs.Var(&f.limits.disk, "disk-quota", "local, as root: the workspace's disk quota in `MB`, its own loop-mounted file system (default $SAGE_LOCAL_DISK_QUOTA_MB or none; refused where it cannot be enforced)")
	fs.StringVar(&f.limits.network, "network", "", "local: network `mode` off, allowlist or open (default off; allowlist when --allow-domain is given)")
	fs.StringVar(&f.limits.iso, "isolation", "", "local: isolation `kind` on Linux: bwrap (default), gvisor (runsc, a second kernel: one sandbox per session, or per command with fresh_per_command) or none")
	fs.Var(&f.limits.allow, "allow-domain", "local: with network allowlist, let commands reach `DOMAIN`, *.DOMAIN, an address, each with an optional :PORT or :* (repeatable)")
	fs.BoolVar(&f.checkpoints, "checkpoints", false, "local: keep the workspace as overlay layers so that sage session checkpoint, rollback and fork work (docs/checkpoints.md)")
	fs.Var(&f.limits.deny, "deny-domain", "local: with network allowlist, refuse `DOMAIN` even when allowed (repeatable; checked first)")
}

// remoteFix is how to name the provider remote mode needs.
const remoteFix = "set --remote-provider aio or SAGE_REMOTE_PROVIDER=aio"

// config merges the SAGE_* environment with the flags. Every error is a
// bad setting (exit 2).
func (f *sandboxFlags) config() (sandbox.Config, error) {
	// These flags stand in front of their variables, so that a flag can
	// mend what the environment lacks; errors then name the flag.
	type override struct{ flag, value string }
	over := map[string]override{}
	for env, o := range map[string]override{"SAGE_SANDBOX_MODE": {"--mode", f.mode},
		"SAGE_REMOTE_PROVIDER": {"--remote-provider", f.remoteProvider}, "SAGE_REMOTE_URL": {"--remote-url", f.remoteURL}} {
		if o.value != "" {
			over[env] = o
		}
	}
	cfg, err := sandbox.ConfigFromLookup(func(k string) (string, bool) {
		if o, ok := over[k]; ok {
			return o.value, true
		}
		return os.LookupEnv(k)
	})
	var ce *sandbox.ConfigError
	if errors.As(err, &ce) {
		if ce.Field == "SAGE_REMOTE_PROVIDER" && ce.Value == "" {
			return cfg, badSetting("remote mode needs a provider: %s", remoteFix)
		}
		if o, ok := over[ce.Field]; ok {
			named := *ce
			named.Field = o.flag
			return cfg, &named
		}
	}
	if err != nil {
		return cfg, err
	}
	if !driver.ValidID(f.session) {
		return cfg, badSetting("--session %q: want 1-64 characters of A-Z a-z 0-9 _ -", f.session)
	}
	sessionDir := filepath.Join(sandbox.Home(), "sessions", f.session)
	cfg.SandboxID = f.session
	cfg.RuntimeDir = filepath.Join(sessionDir, "runtime")
	if f.workspace != "" {
		cfg.Workspace = f.workspace
	}
	if cfg.Workspace == "" {
		cfg.Workspace = filepath.Join(sessionDir, "workspace")
	}
	if cfg.Workspace, err = filepath.Abs(cfg.Workspace); err != nil {
		return cfg, badSetting("--workspace: %w", err)
	}
	if f.timeout < 0 {
		return cfg, badSetting("--timeout %v is negative", f.timeout)
	}
	if f.timeout > 0 {
		cfg.Timeout = f.timeout
	}
	cfg.Mounts = append(cfg.Mounts, f.mounts...)
	f.limits.apply(&cfg.Local)
	if f.checkpoints {
		cfg.Local.Checkpoints = true
	}
	f.opensandbox(&cfg)
	keepRemoteSandbox(&cfg)
	if err := cfg.Validate(); err != nil {
		return cfg, f.named(err)
	}
	if cfg.Mode == sandbox.Remote && !slices.Contains(remote.Providers(), cfg.Remote.Provider) {
		return cfg, f.named(&sandbox.ConfigError{Field: "sandbox.remote.provider", Value: cfg.Remote.Provider,
			Reason: "not a remote provider; want " + strings.Join(remote.Providers(), " or ")})
	}
	return cfg, nil
}

// settingNames are the config fields (YAML keys) the sandbox flags set,
// with the flag that sets each (driver.EnvName names the variable).
var settingNames = []struct{ field, flag string }{
	{"sandbox.mode", "--mode"}, {"sandbox.workspace", "--workspace"}, {"sandbox.timeout", "--timeout"},
	{"sandbox.mounts", "--mount"}, {"sandbox.local.cpu_time_limit", "--cpu-time"},
	{"sandbox.local.memory_limit_mb", "--memory"}, {"sandbox.local.pids_limit", "--pids"},
	{"sandbox.local.file_size_limit_mb", "--file-size"}, {"sandbox.local.disk_quota_mb", "--disk-quota"},
	{"sandbox.local.network", "--network"}, {"sandbox.local.allowed_domains", "--allow-domain"},
	{"sandbox.local.denied_domains", "--deny-domain"}, {"sandbox.local.isolation", "--isolation"},
	{"sandbox.local.checkpoints", "--checkpoints"}, {"sandbox.remote.provider", "--remote-provider"}, {"sandbox.remote.server_url", "--remote-url"},
}

// named renames the field of a *sandbox.ConfigError in err to what the
// user wrote: the flag when it was given, else the variable when it is
// set (sandbox.mounts[1].host_path is --mount; the value says which).
// Other errors pass unchanged.
func (f *sandboxFlags) named(err error) error {
	var ce *sandbox.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	for _, n := range settingNames {
		rest, ok := strings.CutPrefix(ce.Field, n.field)
		if !ok || (rest != "" && rest[0] != '.' && rest[0] != '[') {
			continue
		}
		named := *ce
		env := driver.EnvName(n.field)
		switch _, set := os.LookupEnv(env); {
		case f.fs != nil && flagSet(f.fs, strings.TrimPrefix(n.flag, "--")):
			named.Field = n.flag
		case env != "" && set:
			named.Field = env
		default:
			return err
		}
		return &named
	}
	return err
}

type mountList []sandbox.VolumeMount

func (m *mountList) String() string { return fmt.Sprint(*m) }

func (m *mountList) Set(s string) error {
	v, err := driver.ParseMount(s)
	if err != nil {
		return err
	}
	if v.HostPath, err = filepath.Abs(v.HostPath); err != nil {
		return err
	}
	if _, err := os.Stat(v.HostPath); err != nil {
		return fmt.Errorf("host path: %w", err)
	}
	*m = append(*m, v)
	return nil
}

type envList map[string]string

func (e *envList) String() string { return fmt.Sprint(map[string]string(*e)) }

func (e *envList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || !driver.ValidEnvName(k) {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	if *e == nil {
		*e = envList{}
	}
	(*e)[k] = v
	return nil
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments; "--" ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// shellJoin turns an argument vector into a /bin/sh command line. A single
// argument is taken as a command line already.
func shellJoin(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '+' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (l limitFlags) apply(c *sandbox.LocalConfig) {
	if l.cpuTime.set {
		c.CPUTimeLimit = l.cpuTime.d
	}
	for _, it := range []struct {
		flag optInt
		dst  *int
	}{{l.memory, &c.MemoryLimitMB}, {l.pids, &c.PidsLimit}, {l.fileSize, &c.FileSizeLimitMB}, {l.disk, &c.DiskQuotaMB}} {
		if it.flag.set {
			*it.dst = it.flag.n
		}
	}
	if l.network != "" {
		c.Network = sandbox.NetworkMode(l.network)
	}
	if l.iso != "" {
		c.Isolation.Linux = l.iso
	}
	if l.allow != nil {
		c.AllowedDomains = l.allow
	}
	if l.deny != nil {
		c.DeniedDomains = l.deny
	}
	if l.network == "" && (l.allow != nil || l.deny != nil) {
		c.Network = sandbox.NetworkAllowlist
	}
}

// domainList is a repeatable egress rule flag; each value is checked as
// it is given.
type domainList []string

func (d *domainList) String() string { return strings.Join(*d, ",") }

func (d *domainList) Set(s string) error {
	if _, err := driver.ParseEgressRule(s); err != nil {
		return err
	}
	*d = append(*d, s)
	return nil
}

// optInt is an int flag that knows whether it was given.
type optInt struct {
	n   int
	set bool
}

func (o *optInt) String() string { return strconv.Itoa(o.n) }

func (o *optInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a whole number")
	}
	o.n, o.set = n, true
	return nil
}

// optSeconds is a duration flag that also takes plain seconds.
type optSeconds struct {
	d   time.Duration
	set bool
}

func (o *optSeconds) String() string { return o.d.String() }

func (o *optSeconds) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		o.d, o.set = time.Duration(f*float64(time.Second)), true
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want seconds or a duration")
	}
	o.d, o.set = d, true
	return nil
}

// keepRemoteSandbox makes an orchestrated aio sandbox (remote mode, no
// server URL) outlive the CLI process: the next command of the same
// session finds it again. `sage sandbox rm` releases it.
func keepRemoteSandbox(cfg *sandbox.Config) {
	if cfg.Mode != sandbox.Remote || cfg.Remote.Provider != "aio" || cfg.Remote.ServerURL != "" {
		return
	}
	pc := make(map[string]any, len(cfg.Remote.ProviderConfig)+1)
	for k, v := range cfg.Remote.ProviderConfig {
		pc[k] = v
	}
	if _, set := pc["shutdown_policy"]; !set {
		pc["shutdown_policy"] = "keep"
	}
	cfg.Remote.ProviderConfig = pc
}

// opensandbox puts the --opensandbox-* flags into provider_config.
func (f *sandboxFlags) opensandbox(cfg *sandbox.Config) {
	if f.osbURL == "" && f.osbKeyEnv == "" {
		return
	}
	pc := make(map[string]any, len(cfg.Remote.ProviderConfig)+2)
	for k, v := range cfg.Remote.ProviderConfig {
		pc[k] = v
	}
	if f.osbURL != "" {
		pc["url"] = f.osbURL
	}
	if f.osbKeyEnv != "" {
		pc["api_key_env"] = f.osbKeyEnv
	}
	cfg.Remote.ProviderConfig = pc
}
