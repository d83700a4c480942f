//go:build darwin

package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

const sandboxExec = "/usr/bin/sandbox-exec"

func sysProcAttr(*syscall.Credential) *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// seatbeltIsolator runs commands under sandbox-exec. macOS has no mount
// namespaces: the workspace and mounts keep their host paths.
type seatbeltIsolator struct {
	hostWS, tmp string
	mounts      []driver.VolumeMount
	network     bool
	egress      *egressProxy // network allowlist
	limits      Limits
	none        bool
}

func newIsolator(_ context.Context, cfg driver.Config, s *Sandbox) (isolator, error) {
	iso := &seatbeltIsolator{hostWS: s.hostWS, tmp: filepath.Join(s.runtimeDir, "tmp"), mounts: cfg.Mounts,
		network: cfg.Local.Network == driver.NetworkOpen, egress: s.egress, limits: s.limits}
	switch cfg.Local.Isolation.Darwin {
	case driver.IsolationNone:
		if iso.egress != nil {
			return nil, &driver.ConfigError{Field: "sandbox.local.network", Value: string(cfg.Local.Network),
				Reason: "the allowlist needs Seatbelt to confine commands to the proxy; isolation none has nothing"}
		}
		slog.Warn("local sandbox: isolation is NONE: commands run unisolated on the host", "sandbox", s.id)
		iso.none = true
	case "", driver.IsolationAuto, driver.IsolationSeatbelt:
		if _, err := os.Stat(sandboxExec); err != nil {
			return nil, fmt.Errorf("%w: %s not found; run 'sage doctor'", driver.ErrIsolationUnavailable, sandboxExec)
		}
	default:
		return nil, &driver.ConfigError{Field: "sandbox.local.isolation.darwin", Value: cfg.Local.Isolation.Darwin, Reason: "want auto, seatbelt or none"}
	}
	for i, m := range cfg.Mounts {
		if m.HostPath != m.SandboxPath {
			return nil, &driver.ConfigError{Field: fmt.Sprintf("sandbox.mounts[%d].sandbox_path", i), Value: m.SandboxPath,
				Reason: "macOS cannot remap paths: use the host path"}
		}
	}
	if err := os.MkdirAll(iso.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("local: session tmp: %w", err)
	}
	return iso, nil
}

func (b *seatbeltIsolator) virtualWorkspace(_ driver.Config, hostWS string) string { return hostWS }

func (b *seatbeltIsolator) place(host, _ string) string { return host }

func (b *seatbeltIsolator) close() error { return nil }

func (b *seatbeltIsolator) kind() string {
	if b.none {
		return driver.IsolationNone
	}
	return driver.IsolationSeatbelt
}

func (b *seatbeltIsolator) wrap(inv invocation) (*wrapped, error) {
	extra := map[string]string{"TMPDIR": b.tmp}
	if inv.venv != "" {
		extra["VIRTUAL_ENV"], extra["PATH"] = inv.venv, inv.venv+"/bin:"+hostkit.DefaultPath
	}
	for k, v := range b.egress.withProxyEnv(inv.env) {
		extra[k] = v
	}
	env := hostkit.Environ(nil, b.hostWS, extra)
	limited := append([]string{"/bin/sh", "-c", b.limits.UlimitScript() + ` && exec "$@"`, "sage-limits"}, inv.argv...)
	if b.none {
		return &wrapped{path: limited[0], args: limited, dir: inv.workdir, env: env, done: func() {}}, nil
	}
	o := SeatbeltOptions{Workspace: b.hostWS, Tmp: b.tmp, Network: b.network, ProxyPorts: b.egress.ports()}
	for _, m := range b.mounts {
		if m.ReadOnly {
			o.ReadOnly = append(o.ReadOnly, m.HostPath)
		} else {
			o.ReadWrite = append(o.ReadWrite, m.HostPath)
		}
	}
	for _, x := range inv.binds {
		if x.readOnly {
			o.ReadOnly = append(o.ReadOnly, x.host)
		} else {
			o.ReadWrite = append(o.ReadWrite, x.host)
		}
	}
	profile, err := SeatbeltProfile(o)
	if err != nil {
		return nil, err
	}
	args := append([]string{sandboxExec, "-p", profile}, limited...)
	return &wrapped{path: sandboxExec, args: args, dir: inv.workdir, env: env, done: func() {}}, nil
}

// limitsEnforced: macOS has no cgroups; the shell's ulimit sets
// per-process limits, and its process limit (ulimit -u) counts all the
// user's processes.
func (b *seatbeltIsolator) limitsEnforced() driver.LimitsEnforced { return b.limits.UlimitEnforced() }
