//go:build linux

package isolation

import (
	"fmt"
	"log/slog"
	"os/exec"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
)

// none runs commands on the host (isolation: none), still under the
// limits. It is there because people ask for it; it says so loudly.
type none struct {
	hostWS  string
	prlimit string
	limits  limits.Limits
	cg      *limits.Cgroups
}

func newNone(o Options) (Backend, error) {
	slog.Warn("local sandbox: isolation is NONE: commands run unisolated on the host, with the workspace as their only boundary by convention",
		"sandbox", o.ID)
	pl, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, fmt.Errorf("%w: prlimit (util-linux) not found; it applies the limits; fix: apt-get install util-linux", driver.ErrIsolationUnavailable)
	}
	cg, err := limits.NewCgroups(o.ID, o.Limits)
	if err != nil {
		return nil, err
	}
	return &none{hostWS: o.Workspace, prlimit: pl, limits: o.Limits, cg: cg}, nil
}

func (n *none) VirtualWorkspace() string { return n.hostWS }

func (n *none) Place(host, _ string) string { return host }

func (n *none) Close() error { return n.cg.Remove() }

func (n *none) Kind() string { return driver.IsolationNone }

func (n *none) Wrap(inv Invocation) (*Wrapped, error) {
	extra := map[string]string{"TMPDIR": "/tmp"}
	for k, v := range inv.Env {
		extra[k] = v
	}
	env := hostkit.Environ(nil, n.hostWS, extra)
	if inv.Venv != "" {
		env = hostkit.Environ(nil, n.hostWS, withVenv(extra, inv.Venv))
	}
	args := append([]string{n.prlimit}, n.limits.PrlimitArgs(n.cg.Memory())...)
	args = append(append(args, "--"), inv.Argv...)
	cmd, err := n.cg.Command(n.limits.CPUTime)
	if err != nil {
		return nil, err
	}
	var own []string
	if cmd != nil {
		own = append(own, cmd.Procs())
	}
	path, argv, err := n.cg.Trampoline(n.prlimit, args[1:], own...)
	if err != nil {
		cmd.Release()
		return nil, err
	}
	// The command joins its CPU cgroup itself (the trampoline); the
	// watchdog starts with it.
	return &Wrapped{Path: path, Args: argv, Dir: inv.Workdir, Env: env,
		Started: func(int) error { return cmd.Start(0) }, Done: cmd.Release, Report: cmd.End}, nil
}

func withVenv(env map[string]string, venv string) map[string]string {
	out := map[string]string{"VIRTUAL_ENV": venv, "PATH": venv + "/bin:" + hostkit.DefaultPath}
	for k, v := range env {
		out[k] = v
	}
	return out
}

func (n *none) LimitsEnforced() driver.LimitsEnforced { return n.limits.Enforced(n.cg, false) }
