//go:build linux

package local

import (
	"context"
	"os/exec"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
)

// SandboxPath is PATH inside the sandbox (the venv's bin is put first once
// it exists). Host PATH entries mean nothing inside.
const SandboxPath = isolation.SandboxPath

// BwrapCommand returns bwrap running argv with this sandbox's argument
// list, directly (no gate, no cgroup, no limits, arguments on the command
// line, the workspace bound by path), as the same uid and with the same
// seccomp filter: the baseline the benchmarks compare against. It is nil
// with isolation none. The caller runs it once.
func (s *Sandbox) BwrapCommand(argv ...string) *exec.Cmd {
	b, ok := s.iso.(*isolation.Bwrap)
	if !ok {
		return nil
	}
	return b.Command(argv...)
}

// RunscFix says how to install runsc.
const RunscFix = isolation.RunscFix

// RunscNewerFix says how to replace a runsc too old for sage.
const RunscNewerFix = isolation.RunscNewerFix

// ProbeRunsc runs /bin/true under runsc, with no network and a throwaway
// state directory.
func ProbeRunsc(ctx context.Context, runsc string) error { return isolation.ProbeRunsc(ctx, runsc) }
