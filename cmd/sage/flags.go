package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
)

// sandboxFlags are the flags every sandbox subcommand shares.
type sandboxFlags struct {
	mode      string
	workspace string
	session   string
	timeout   time.Duration
	mounts    mountList
	env       envList
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "mode", "", "sandbox mode: local, passthrough or remote (default $SAGE_SANDBOX_MODE or local)")
	fs.StringVar(&f.workspace, "workspace", "", "host workspace directory (default $SAGE_HOME/sessions/<session>/workspace)")
	fs.StringVar(&f.session, "session", "default", "session id: names the sandbox and its default workspace")
	fs.DurationVar(&f.timeout, "timeout", 0, "command timeout (default 30s)")
	fs.Var(&f.mounts, "mount", "extra mount host:sandbox[:ro] (repeatable)")
	fs.Var(&f.env, "env", "environment variable K=V for the command (repeatable)")
}

// config merges the SAGE_* environment with the flags.
func (f *sandboxFlags) config() (sandbox.Config, error) {
	cfg, err := sandbox.ConfigFromEnv()
	if err != nil {
		return cfg, err
	}
	if !sandbox.ValidID(f.session) {
		return cfg, fmt.Errorf("--session %q: want 1-64 characters of A-Z a-z 0-9 _ -", f.session)
	}
	if f.mode != "" {
		cfg.Mode = sandbox.Type(f.mode)
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
		return cfg, fmt.Errorf("--workspace: %w", err)
	}
	if f.timeout < 0 {
		return cfg, fmt.Errorf("--timeout %v is negative", f.timeout)
	}
	if f.timeout > 0 {
		cfg.Timeout = f.timeout
	}
	cfg.Mounts = append(cfg.Mounts, f.mounts...)
	return cfg, cfg.Validate()
}

type mountList []sandbox.VolumeMount

func (m *mountList) String() string { return fmt.Sprint(*m) }

func (m *mountList) Set(s string) error {
	v, err := sandbox.ParseMount(s)
	if err != nil {
		return err
	}
	if v.HostPath, err = filepath.Abs(v.HostPath); err != nil {
		return err
	}
	*m = append(*m, v)
	return nil
}

type envList map[string]string

func (e *envList) String() string { return fmt.Sprint(map[string]string(*e)) }

func (e *envList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || !sandbox.ValidEnvName(k) {
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
