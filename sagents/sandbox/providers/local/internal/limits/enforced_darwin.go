//go:build darwin

package limits

import (
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// UlimitEnforced says how each limit holds on macOS: it has no cgroups;
// the shell's ulimit sets per-process limits, and its process limit
// (ulimit -u) counts all the user's processes.
func (l Limits) UlimitEnforced() driver.LimitsEnforced {
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

// Probe says how the default limits of local mode hold on this machine.
func Probe() driver.LimitsEnforced {
	return Resolve(driver.LocalConfig{}).UlimitEnforced()
}
