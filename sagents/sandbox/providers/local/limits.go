package local

import (
	"strconv"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Defaults for the limits a config leaves at 0. They are safe for agent
// workloads: a runaway command cannot take the machine down.
const (
	DefaultMemoryLimitMB   = 2048
	DefaultPidsLimit       = 512
	DefaultFileSizeLimitMB = 1024
	// MaxTmpMB bounds the private /tmp (a tmpfs, so it is memory).
	MaxTmpMB = 1024
)

// Limits are the resolved limits of a sandbox; 0 means none.
type Limits struct {
	CPUTime       time.Duration
	MemoryBytes   int64
	Pids          int
	FileSizeBytes int64
	TmpBytes      int64
}

// ResolveLimits applies the defaults: 0 means the default, -1 no limit.
func ResolveLimits(c sandbox.LocalConfig) Limits {
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
	}
	if l.MemoryBytes > 0 && l.MemoryBytes < l.TmpBytes {
		l.TmpBytes = l.MemoryBytes
	}
	return l
}

// prlimitArgs are the prlimit(1) flags for the limits. RLIMIT_AS is set
// only when memory is not already bounded by a cgroup. The CPU hard limit
// is one second above the soft one, so SIGXCPU comes first.
func (l Limits) prlimitArgs(memoryByCgroup bool) []string {
	args := []string{"--core=0"}
	if l.CPUTime > 0 {
		s := int64((l.CPUTime + time.Second - 1) / time.Second)
		args = append(args, "--cpu="+strconv.FormatInt(s, 10)+":"+strconv.FormatInt(s+1, 10))
	}
	if l.MemoryBytes > 0 && !memoryByCgroup {
		args = append(args, "--as="+pair(l.MemoryBytes))
	}
	if l.FileSizeBytes > 0 {
		args = append(args, "--fsize="+pair(l.FileSizeBytes))
	}
	if l.Pids > 0 {
		args = append(args, "--nproc="+pair(int64(l.Pids)))
	}
	return args
}

func pair(v int64) string {
	s := strconv.FormatInt(v, 10)
	return s + ":" + s
}

// ulimitScript is the POSIX-shell equivalent, for macOS: -t seconds, -v
// KiB, -f 512-byte blocks, -u processes.
func (l Limits) ulimitScript() string {
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
