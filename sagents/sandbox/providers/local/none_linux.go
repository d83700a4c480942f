//go:build linux

package local

import (
	"fmt"
	"log/slog"
	"os/exec"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
)

// noIsolation runs commands on the host (isolation: none), still under
// the limits. It is there because people ask for it; it says so loudly.
type noIsolation struct {
	hostWS  string
	prlimit string
	limits  Limits
	cg      *limits.Cgroups
}

func newNoIsolation(s *Sandbox) (isolator, error) {
	slog.Warn("local sandbox: isolation is NONE: commands run unisolated on the host, with the workspace as their only boundary by convention",
		"sandbox", s.id)
	pl, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, fmt.Errorf("%w: prlimit (util-linux) not found; it applies the limits; fix: apt-get install util-linux", driver.ErrIsolationUnavailable)
	}
	cg, err := limits.NewCgroups(s.id, s.limits)
	if err != nil {
		return nil, err
	}
	return &noIsolation{hostWS: s.hostWS, prlimit: pl, limits: s.limits, cg: cg}, nil
}

func (n *noIsolation) virtualWorkspace(_ driver.Config, hostWS string) string { return hostWS }

func (n *noIsolation) place(host, _ string) string { return host }

func (n *noIsolation) close() error { return n.cg.Remove() }

func (n *noIsolation) kind() string { return driver.IsolationNone }

func (n *noIsolation) wrap(inv invocation) (*wrapped, error) {
	extra := map[string]string{"TMPDIR": "/tmp"}
	for k, v := range inv.env {
		extra[k] = v
	}
	env := hostkit.Environ(nil, n.hostWS, extra)
	if inv.venv != "" {
		env = hostkit.Environ(nil, n.hostWS, withVenv(extra, inv.venv))
	}
	args := append([]string{n.prlimit}, n.limits.PrlimitArgs(n.cg.Memory())...)
	args = append(append(args, "--"), inv.argv...)
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
	return &wrapped{path: path, args: argv, dir: inv.workdir, env: env,
		started: func(int) error { return cmd.Start(0) }, done: cmd.Release, report: cmd.End}, nil
}

func withVenv(env map[string]string, venv string) map[string]string {
	out := map[string]string{"VIRTUAL_ENV": venv, "PATH": venv + "/bin:" + hostkit.DefaultPath}
	for k, v := range env {
		out[k] = v
	}
	return out
}

func (n *noIsolation) limitsEnforced() driver.LimitsEnforced { return n.limits.Enforced(n.cg, false) }
