//go:build linux

package local

import (
	"os"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
)

// enforced says how each limit holds, given the sandbox's cgroups; userns
// is true when commands run in their own user namespace (bwrap).
func (l Limits) enforced(cg *cgroupSet, userns bool) sandbox.LimitsEnforced {
	e := sandbox.LimitsEnforced{CPUTime: sandbox.EnforcedNone, Memory: sandbox.EnforcedNone,
		Pids: sandbox.EnforcedNone, FileSize: sandbox.EnforcedNone}
	if l.CPUTime > 0 {
		e.CPUTime = sandbox.EnforcedPerProcess
		if cg != nil && cg.cpuParent != "" {
			e.CPUTime = sandbox.EnforcedCgroup
		}
	}
	if l.MemoryBytes > 0 {
		e.Memory = sandbox.EnforcedPerProcess
		if cg.memory() {
			e.Memory = sandbox.EnforcedCgroup
		}
	}
	if l.Pids > 0 {
		switch {
		case cg != nil && cg.pids:
			e.Pids = sandbox.EnforcedCgroup
		case os.Geteuid() == 0: // root ignores RLIMIT_NPROC (refused at creation)
		case userns:
			e.Pids = sandbox.EnforcedUserNS
		default:
			e.Pids = sandbox.EnforcedPerUser
		}
	}
	if l.FileSizeBytes > 0 {
		e.FileSize = sandbox.EnforcedPerProcess
	}
	return e
}

func (b *bwrapIsolator) limitsEnforced() sandbox.LimitsEnforced { return b.limits.enforced(b.cg, true) }

func (n *noIsolation) limitsEnforced() sandbox.LimitsEnforced { return n.limits.enforced(n.cg, false) }

// ProbeLimits says how the limits of a bwrap sandbox would hold for the
// current user on this machine: the default limits, with a CPU time
// budget asked for ("none" there means --cpu-time is refused). It creates
// the cgroups the limits use and removes them again.
func ProbeLimits() sandbox.LimitsEnforced {
	l := ResolveLimits(sandbox.LocalConfig{CPUTimeLimit: time.Second})
	cg, _ := createCgroups("sage-probe-"+randomSuffix(), l)
	defer cg.remove()
	e := l.enforced(cg, true)
	if cg.cpuParent == "" {
		e.CPUTime = sandbox.EnforcedNone
	}
	return e
}
