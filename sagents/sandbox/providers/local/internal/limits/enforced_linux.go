//go:build linux

package local

import (
	"os"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// enforced says how each limit holds, given the sandbox's cgroups; userns
// is true when commands run in their own user namespace (bwrap).
func (l Limits) enforced(cg *cgroupSet, userns bool) driver.LimitsEnforced {
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
		if cg.memory() {
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

func (b *bwrapIsolator) limitsEnforced() driver.LimitsEnforced { return b.limits.enforced(b.cg, true) }

func (n *noIsolation) limitsEnforced() driver.LimitsEnforced { return n.limits.enforced(n.cg, false) }

// ProbeLimits says how the limits of a bwrap sandbox would hold for the
// current user on this machine: the default limits, with a CPU time
// budget asked for ("none" there means --cpu-time is refused). It creates
// the cgroups the limits use and removes them again.
func ProbeLimits() driver.LimitsEnforced {
	l := ResolveLimits(driver.LocalConfig{CPUTimeLimit: time.Second})
	cg, _ := createCgroups("sage-probe-"+randomSuffix(), l)
	defer cg.remove()
	e := l.enforced(cg, true)
	if cg.cpuParent == "" {
		e.CPUTime = driver.EnforcedNone
	}
	return e
}
