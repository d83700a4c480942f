//go:build darwin

package isolation

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	sbprofile "github.com/sage-go/sage/sagents/sandbox/providers/local/internal/seatbelt"
)

const sandboxExec = "/usr/bin/sandbox-exec"

// SysProcAttr is how the process starts (macOS: as the caller).
func (w *Wrapped) SysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// seatbelt runs commands under sandbox-exec. macOS has no mount
// namespaces: the workspace and mounts keep their host paths.
type seatbelt struct {
	hostWS, tmp string
	mounts      []driver.VolumeMount
	network     bool
	egress      *Egress // network allowlist
	limits      limits.Limits
	none        bool
}

// New returns the backend o.Isolation names on macOS: Seatbelt (auto) or
// none.
func New(_ context.Context, o Options) (Backend, error) {
	iso := &seatbelt{hostWS: o.Workspace, tmp: filepath.Join(o.RuntimeDir, "tmp"), mounts: o.Mounts,
		network: o.Network == driver.NetworkOpen, egress: o.Egress, limits: o.Limits}
	switch o.Isolation {
	case driver.IsolationNone:
		if iso.egress != nil {
			return nil, &driver.ConfigError{Field: "sandbox.local.network", Value: string(o.Network),
				Reason: "the allowlist needs Seatbelt to confine commands to the proxy; isolation none has nothing"}
		}
		slog.Warn("local sandbox: isolation is NONE: commands run unisolated on the host", "sandbox", o.ID)
		iso.none = true
	case "", driver.IsolationAuto, driver.IsolationSeatbelt:
		if _, err := os.Stat(sandboxExec); err != nil {
			return nil, fmt.Errorf("%w: %s not found; run 'sage doctor'", driver.ErrIsolationUnavailable, sandboxExec)
		}
	default:
		return nil, &driver.ConfigError{Field: "sandbox.local.isolation.darwin", Value: o.Isolation, Reason: "want auto, seatbelt or none"}
	}
	for i, m := range o.Mounts {
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

func (b *seatbelt) VirtualWorkspace() string { return b.hostWS }

func (b *seatbelt) Place(host, _ string) string { return host }

func (b *seatbelt) Close() error { return nil }

func (b *seatbelt) Kind() string {
	if b.none {
		return driver.IsolationNone
	}
	return driver.IsolationSeatbelt
}

func (b *seatbelt) Wrap(inv Invocation) (*Wrapped, error) {
	extra := map[string]string{"TMPDIR": b.tmp}
	if inv.Venv != "" {
		extra["VIRTUAL_ENV"], extra["PATH"] = inv.Venv, inv.Venv+"/bin:"+hostkit.DefaultPath
	}
	for k, v := range b.egress.WithEnv(inv.Env) {
		extra[k] = v
	}
	env := hostkit.Environ(nil, b.hostWS, extra)
	limited := append([]string{shell, "-c", b.limits.UlimitScript() + ` && exec "$@"`, "sage-limits"}, inv.Argv...)
	if b.none {
		return &Wrapped{Path: limited[0], Args: limited, Dir: inv.Workdir, Env: env, Done: func() {}}, nil
	}
	o := sbprofile.Options{Workspace: b.hostWS, Tmp: b.tmp, Network: b.network}
	if b.egress != nil {
		o.ProxyPorts = b.egress.Ports
	}
	for _, m := range b.mounts {
		if m.ReadOnly {
			o.ReadOnly = append(o.ReadOnly, m.HostPath)
		} else {
			o.ReadWrite = append(o.ReadWrite, m.HostPath)
		}
	}
	for _, x := range inv.Binds {
		if x.ReadOnly {
			o.ReadOnly = append(o.ReadOnly, x.Host)
		} else {
			o.ReadWrite = append(o.ReadWrite, x.Host)
		}
	}
	profile, err := sbprofile.Profile(o)
	if err != nil {
		return nil, err
	}
	args := append([]string{sandboxExec, "-p", profile}, limited...)
	return &Wrapped{Path: sandboxExec, Args: args, Dir: inv.Workdir, Env: env, Done: func() {}}, nil
}

// limitsEnforced: macOS has no cgroups; the shell's ulimit sets
// per-process limits, and its process limit (ulimit -u) counts all the
// user's processes.
func (b *seatbelt) LimitsEnforced() driver.LimitsEnforced { return b.limits.UlimitEnforced() }
