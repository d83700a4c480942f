package local

import (
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
)

// Defaults for the limits a config leaves at 0. They are safe for agent
// workloads: a runaway command cannot take the machine down.
const (
	DefaultMemoryLimitMB   = limits.DefaultMemoryLimitMB
	DefaultPidsLimit       = limits.DefaultPidsLimit
	DefaultFileSizeLimitMB = limits.DefaultFileSizeLimitMB
	// MaxTmpMB bounds the private /tmp (a tmpfs, so it is memory), which
	// is also at most half the memory limit.
	MaxTmpMB = limits.MaxTmpMB
	// MaxShmMB bounds /dev/shm, as Docker does by default; it is also at
	// most a quarter of the memory limit.
	MaxShmMB = limits.MaxShmMB
)

// Limits are the resolved limits of a sandbox; 0 means none: CPUTime,
// MemoryBytes, Pids, FileSizeBytes, TmpBytes and ShmBytes. The type and
// its enforcement live in package internal/limits.
type Limits = limits.Limits

// ResolveLimits applies the defaults: 0 means the default, -1 no limit.
func ResolveLimits(c driver.LocalConfig) Limits { return limits.Resolve(c) }

// ProbeLimits says how the limits of a sandbox would hold for the current
// user on this machine. On Linux these are the default limits of a bwrap
// sandbox with a CPU time budget asked for ("none" there means --cpu-time
// is refused); it creates the cgroups the limits use and removes them
// again. On macOS they are the default limits under the shell's ulimit.
func ProbeLimits() driver.LimitsEnforced { return limits.Probe() }

// DefaultsSummary describes the defaults of local mode in one line.
func DefaultsSummary() string {
	return "network off, memory " + strconv.Itoa(DefaultMemoryLimitMB) + " MB, pids " + strconv.Itoa(DefaultPidsLimit) +
		", file size " + strconv.Itoa(DefaultFileSizeLimitMB) + " MB, private /tmp up to " + strconv.Itoa(MaxTmpMB) +
		" MB, CPU time unlimited (timeout 30s)"
}
