//go:build darwin

package local

import (
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// limitsEnforced: macOS has no cgroups; the shell's ulimit sets
// per-process limits, and its process limit (ulimit -u) counts all the
// user's processes.
func (b *seatbeltIsolator) limitsEnforced() driver.LimitsEnforced { return b.limits.ulimitEnforced() }

func (l Limits) ulimitEnforced() driver.LimitsEnforced {
	e := driver.LimitsEnforced{CPUTime: driver.EnforcedNone, Memory: driver.EnforcedNone,
		Pids: driver.EnforcedNone, FileSize: driver.EnforcedNone}
	if l.CPUTime > 0 {
		e.CPUTime = driver.EnforcedPerProcess
	}
	if l.MemoryBytes > 0 {
		e.Memory = driver.EnforcedPerProcess
	}
	if l.Pids > 0 {
		e.Pids = driver.EnforcedPerUser
	}
	if l.FileSizeBytes > 0 {
		e.FileSize = driver.EnforcedPerProcess
	}
	return e
}

// ProbeLimits says how the default limits of local mode hold on this
// machine.
func ProbeLimits() driver.LimitsEnforced {
	return ResolveLimits(driver.LocalConfig{}).ulimitEnforced()
}
