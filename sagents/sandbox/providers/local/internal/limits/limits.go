package limits

import (
	"strconv"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Defaults for the limits a config leaves at 0. They are safe for agent
// workloads: a runaway command cannot take the machine down.
const (
	DefaultMemoryLimitMB   = 2048
	DefaultPidsLimit       = 512
	DefaultFileSizeLimitMB = 1024
	// MaxTmpMB bounds the private /tmp (a tmpfs, so it is memory), which
	// is also at most half the memory limit.
	MaxTmpMB = 1024
	// MaxShmMB bounds /dev/shm, as Docker does by default; it is also at
	// most a quarter of the memory limit.
	MaxShmMB = 64
)

// Limits are the resolved limits of a sandbox; 0 means none.
type Limits struct {
	CPUTime       time.Duration
	MemoryBytes   int64
	Pids          int
	FileSizeBytes int64
	TmpBytes      int64
	ShmBytes      int64
	// memoryAsked: the config set the memory limit itself (> 0), so it
	// must hold for the whole command or the sandbox is refused; the
	// default limit falls back to RLIMIT_AS, reported as per process.
	memoryAsked bool
}

// Resolve applies the defaults: 0 means the default, -1 no limit.
func Resolve(c driver.LocalConfig) Limits {
	pick := func(v, def int) int64 {
		switch {
		case v < 0:
			return 0
		case v == 0:
			return int64(def)
		}
		return int64(v)
	}
	l := Limits{
		CPUTime:       c.CPUTimeLimit,
		MemoryBytes:   pick(c.MemoryLimitMB, DefaultMemoryLimitMB) << 20,
		Pids:          int(pick(c.PidsLimit, DefaultPidsLimit)),
		FileSizeBytes: pick(c.FileSizeLimitMB, DefaultFileSizeLimitMB) << 20,
		TmpBytes:      MaxTmpMB << 20,
		memoryAsked:   c.MemoryLimitMB > 0,
	}
	l.ShmBytes = MaxShmMB << 20
	// Files in /tmp and /dev/shm are memory that no process holds: killing
	// the command that wrote them frees none of it. Full, they must still
	// leave the session's own processes room, the supervisor above all
	// (the OOM killer taking it ends the session, /tmp and all), so
	// together they take at most three quarters of the memory limit:
	// /tmp half (the kernel's own default for a tmpfs), /dev/shm a quarter.
	if l.MemoryBytes > 0 {
		l.TmpBytes = min(l.TmpBytes, l.MemoryBytes/2)
		l.ShmBytes = min(l.ShmBytes, l.MemoryBytes/4)
	}
	return l
}

// Rlimit is one resource limit, named as prlimit(1) names it.
type Rlimit struct {
	Flag      string // prlimit(1) option
	Resource  int    // RLIMIT_* number (Linux)
	Soft, Max uint64
}

// Linux RLIMIT_* numbers (the same on every architecture Go supports).
const (
	RlimitCPU   = 0
	RlimitFsize = 1
	RlimitCore  = 4
	RlimitNproc = 6
	RlimitAS    = 9
)

// Rlimits lists the limits to set. RLIMIT_AS is set only when memory is
// not already bounded by a cgroup. The CPU time budget of the whole
// command is the cgroup watchdog's (cpubudget_linux.go); RLIMIT_CPU stays
// as a per-process backstop one second above it, so the exact count of
// the cgroup decides (RLIMIT_CPU counts whole clock ticks, and a busy host
// makes it run ahead). The CPU hard limit is one second above the soft
// one, so SIGXCPU comes first.
func (l Limits) Rlimits(memoryByCgroup bool) []Rlimit {
	out := []Rlimit{{"core", RlimitCore, 0, 0}}
	if l.CPUTime > 0 {
		s := uint64((l.CPUTime+time.Second-1)/time.Second) + 1
		out = append(out, Rlimit{"cpu", RlimitCPU, s, s + 1})
	}
	if l.MemoryBytes > 0 && !memoryByCgroup {
		out = append(out, Rlimit{"as", RlimitAS, uint64(l.MemoryBytes), uint64(l.MemoryBytes)})
	}
	if l.FileSizeBytes > 0 {
		out = append(out, Rlimit{"fsize", RlimitFsize, uint64(l.FileSizeBytes), uint64(l.FileSizeBytes)})
	}
	if l.Pids > 0 {
		out = append(out, Rlimit{"nproc", RlimitNproc, uint64(l.Pids), uint64(l.Pids)})
	}
	return out
}

// PrlimitArgs are the same limits as prlimit(1) flags.
func (l Limits) PrlimitArgs(memoryByCgroup bool) []string {
	var args []string
	for _, r := range l.Rlimits(memoryByCgroup) {
		args = append(args, "--"+r.Flag+"="+strconv.FormatUint(r.Soft, 10)+":"+strconv.FormatUint(r.Max, 10))
	}
	return args
}

// UlimitScript is the POSIX-shell equivalent, for macOS: -t seconds, -v
// KiB, -f 512-byte blocks, -u processes.
func (l Limits) UlimitScript() string {
	s := "ulimit -c 0"
	if l.CPUTime > 0 {
		s += " && ulimit -t " + strconv.FormatInt(int64((l.CPUTime+time.Second-1)/time.Second), 10)
	}
	if l.MemoryBytes > 0 {
		s += " && ulimit -v " + strconv.FormatInt(l.MemoryBytes>>10, 10)
	}
	if l.FileSizeBytes > 0 {
		s += " && ulimit -f " + strconv.FormatInt(l.FileSizeBytes/512, 10)
	}
	if l.Pids > 0 {
		s += " && ulimit -u " + strconv.Itoa(l.Pids)
	}
	return s
}

// SIGXCPUExit is the exit code of a command ended by SIGXCPU (128+24),
// what RLIMIT_CPU gives a single process and what a command killed for
// its CPU budget reports.
const SIGXCPUExit = 128 + 24
