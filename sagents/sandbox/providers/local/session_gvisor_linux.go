//go:build linux

package local

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// A gVisor session sandbox is one runsc sandbox per session whose init is
// the same supervisor as bwrap's (session_linux.go): the runsc start is
// paid once per session, and every command, background task and Python or
// JavaScript call runs on gVisor's kernel inside it.
//
// The control channel is one end of a host socketpair that runsc donates
// to the supervisor as its descriptor 3 (runsc run --pass-fd): inside,
// gVisor wraps it as a host-backed Unix socket that has no address, so no
// process in the sandbox can connect to it, and the supervisor (not
// dumpable, like under bwrap; so is the egress bridge, which holds a copy
// with network allowlist) is out of reach: gVisor's kernel refuses ptrace
// and reading or opening its /proc/PID/fd links (unlike Linux it lists
// their numbers and shows /proc/PID/fdinfo; a socket is never reopened
// through /proc there). Descriptors
// the host sends over it (each command's stdio pipes) become host-backed
// files inside; nothing crosses the other way (gVisor refuses to send
// descriptors to the host), so the supervisor sends no pidfd and the host
// never learns, or signals, a pid of a process inside: signals go through
// the supervisor by command id.
//
// Limits: the host cgroups around runsc (memory, pids, CPU) hold the
// whole session; the supervisor and so every command get RLIMIT_NPROC,
// RLIMIT_FSIZE and RLIMIT_CORE from the spec; each command's CPU budget
// is its RLIMIT_CPU inside gVisor's kernel (set before the command runs:
// soft at the budget, SIGXCPU; hard a second later, SIGKILL), since every
// process of the session is a thread of the same host processes (the
// Sentry) and a host cgroup cannot tell the commands apart; its RLIMIT_AS
// is set the same way. So the budget holds per process, not for the
// command's processes together as under bwrap, and the result's
// LimitsEnforced says so (rlimit-per-process).

// gvisorControlFD is the supervisor's control socket in a gVisor session
// sandbox (runsc run --pass-fd=3:gvisorControlFD).
const gvisorControlFD = isolation.GvisorControlFD

// gvisorSessionLaunch starts runsc with the supervisor as the sandbox's
// init, under the same spec (mounts, seccomp, uid, rlimits, host
// cgroups) as any command of isolation gvisor. runsc itself runs as root
// on the host, in the sandbox's cgroups (the wrapped path is the cgroup
// trampoline); the supervisor inside runs as the session's uid. runsc run
// is attached: killed with this process (parent-death signal), its
// sandbox goes with it. The control socket is the child's descriptor 3
// (gVisor's wrap passes no other), donated to the supervisor.
//
// gVisor has no Landlock, so the supervisor tags each command's processes
// with a supplementary group of its own instead of a domain
// (supervisor/tag_linux.go): it gets CAP_SETGID from the spec, and
// CAP_SYS_RESOURCE, which exempts it from the RLIMIT_NPROC its commands
// share with it (a fork bomb would keep the Go runtime from making a
// thread, and kill the supervisor), both in its ambient set so that the
// network bridge's exec of it keeps them; no command keeps them.
//
// With checkpoints on (StdioControl), the control socket is runsc's stdin
// instead, the sandbox's own, which runsc restore hands back (its own
// stdin): the supervisor takes it from its stdin (--fd 0).
func gvisorSessionLaunch(g *isolation.Gvisor) sessionLaunch {
	fd := gvisorControlFD
	if g.StdioControl() {
		fd = 0
	}
	sl := sessionLaunch{what: "the gVisor session sandbox", stdio: g.StdioControl(),
		argv: []string{sandboxSupervisor, "--fd", strconv.Itoa(fd), "--protocol", strconv.Itoa(supervisor.Protocol),
			"--group-tags", onOff(commandDomains)}}
	if commandDomains { // with group tags
		sl.caps = []string{"CAP_SETGID", "CAP_SYS_RESOURCE"}
	}
	return sl
}

// commandBudget gives req its own CPU budget: under bwrap a host cgroup
// the command is put in before its first instruction; under gVisor its
// RLIMIT_CPU, set with its RLIMIT_AS by a shell in front of it (see the
// top of this file).
func (s *Sandbox) commandBudget(req *supervisor.Request) (*limits.CommandCgroup, error) {
	if _, ok := s.iso.(*isolation.Gvisor); ok {
		req.Argv = gvisorCommandLimits(s.limits, req.Argv)
		// Where bwrap's command cgroup takes the command's leftover
		// processes with it, its process group dies with its leader.
		req.GroupDies = s.limits.CPUTime > 0
		return nil, nil
	}
	return s.iso.(*isolation.Bwrap).Cgroups().Command(s.limits.CPUTime)
}

// gvisorCommandLimits puts a shell in front of argv that sets the limits
// a gVisor session's supervisor does not carry, since they are each
// command's: RLIMIT_CPU (soft at the budget, hard a second later) and
// RLIMIT_AS (which a Go supervisor could not even start under).
func gvisorCommandLimits(l Limits, argv []string) []string {
	var set []string
	if l.CPUTime > 0 {
		soft := int64((l.CPUTime + time.Second - 1) / time.Second)
		set = append(set, fmt.Sprintf("ulimit -S -t %d", soft), fmt.Sprintf("ulimit -H -t %d", soft+1))
	}
	if l.MemoryBytes > 0 {
		set = append(set, fmt.Sprintf("ulimit -v %d", l.MemoryBytes>>10))
	}
	if len(set) == 0 {
		return argv
	}
	return append([]string{"/bin/sh", "-c", strings.Join(set, " && ") + ` && exec "$@"`, "sage-limits"}, argv...)
}

// budgetEnd marks res as over its CPU budget when gVisor's kernel ended
// it, or the foreground process its shell waited for, for its RLIMIT_CPU
// (bwrap's budget is read from its cgroup, k.end), and says that the
// budget holds per process.
func (s *Sandbox) budgetEnd(res *driver.CommandResult) {
	if _, ok := s.iso.(*isolation.Gvisor); !ok || s.limits.CPUTime <= 0 {
		return
	}
	if res.LimitsEnforced != nil {
		le := *res.LimitsEnforced
		le.CPUTime = driver.EnforcedPerProcess
		res.LimitsEnforced = &le
	}
	if res.Signal == "SIGXCPU" || res.ExitCode == sigxcpuExit {
		res.CPUTimeExceeded, res.Success = true, false
		res.ExitCode, res.Signal = sigxcpuExit, "SIGXCPU"
	}
}
