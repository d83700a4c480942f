//go:build linux

package sessiond

import (
	"strconv"

	"github.com/sage-go/sage/internal/procfs"
)

// procStart returns pid's start time (clock ticks after boot, field 22
// of /proc/PID/stat); ok is false when pid is gone or a zombie.
func procStart(pid int) (start uint64, ok bool) {
	fields, ok := procfs.Stat(pid)
	if !ok || len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return start, err == nil
}

// treePSS is the PSS, in bytes, of pid and all its descendants together:
// the memory a session costs (each shared page counted once overall).
// Processes whose smaps_rollup cannot be read count as 0.
func treePSS(pid int) int64 { return procfs.TreePSS(pid) }
