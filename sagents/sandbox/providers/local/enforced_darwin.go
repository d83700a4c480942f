//go:build darwin

package local

import "github.com/sage-go/sage/sagents/sandbox"

// limitsEnforced: macOS has no cgroups; the shell's ulimit sets
// per-process limits, and its process limit (ulimit -u) counts all the
// user's processes.
func (b *seatbeltIsolator) limitsEnforced() sandbox.LimitsEnforced { return b.limits.ulimitEnforced() }

func (l Limits) ulimitEnforced() sandbox.LimitsEnforced {
	e := sandbox.LimitsEnforced{CPUTime: sandbox.EnforcedNone, Memory: sandbox.EnforcedNone,
		Pids: sandbox.EnforcedNone, FileSize: sandbox.EnforcedNone}
	if l.CPUTime > 0 {
		e.CPUTime = sandbox.EnforcedPerProcess
	}
	if l.MemoryBytes > 0 {
		e.Memory = sandbox.EnforcedPerProcess
	}
	if l.Pids > 0 {
		e.Pids = sandbox.EnforcedPerUser
	}
	if l.FileSizeBytes > 0 {
		e.FileSize = sandbox.EnforcedPerProcess
	}
	return e
}

// ProbeLimits says how the default limits of local mode hold on this
// machine.
func ProbeLimits() sandbox.LimitsEnforced {
	return ResolveLimits(sandbox.LocalConfig{}).ulimitEnforced()
}
