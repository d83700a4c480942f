//go:build linux

package limits

import (
	"os"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Enforced says how each limit holds, given the sandbox's cgroups; userns
// is true when commands run in their own user namespace (bwrap).
func (l Limits) Enforced(cg *Cgroups, userns bool) driver.LimitsEnforced {
	e := driver.LimitsEnforced{CPUTime: driver.EnforcedNone, Memory: driver.EnforcedNone,
		Pids: driver.EnforcedNone, FileSize: driver.EnforcedNone}
	if l.CPUTime > 0 {
		e.CPUTime = driver.EnforcedPerProcess
		if cg != nil && cg.cpuParent != "" {
			e.CPUTime = driver.EnforcedCgroup
		}
	}
	if l.MemoryBytes > 0 {
		e.Memory = driver.EnforcedPerProcess
		if cg.Memory() {
			e.Memory = driver.EnforcedCgroup
		}
	}
	if l.Pids > 0 {
		switch {
		case cg != nil && cg.pids:
			e.Pids = driver.EnforcedCgroup
		case os.Geteuid() == 0: // root ignores RLIMIT_NPROC (refused at creation)
		case userns:
			e.Pids = driver.EnforcedUserNS
		default:
			e.Pids = driver.EnforcedPerUser
		}
	}
	if l.FileSizeBytes > 0 {
		e.FileSize = driver.EnforcedPerProcess
	}
	return e
}

// Probe says how the limits of a bwrap sandbox would hold for the
// current user on this machine: the default limits, with a CPU time
// budget asked for ("none" there means --cpu-time is refused). It creates
// the cgroups the limits use and removes them again.
func Probe() driver.LimitsEnforced {
	l := Resolve(driver.LocalConfig{CPUTimeLimit: time.Second})
	cg, _ := ProbeCgroups(l)
	defer cg.Remove()
	e := l.Enforced(cg, true)
	if cg.cpuParent == "" {
		e.CPUTime = driver.EnforcedNone
	}
	return e
}
