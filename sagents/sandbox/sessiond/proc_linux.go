//go:build linux

package sessiond

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// procStart returns pid's start time (clock ticks after boot, field 22
// of /proc/PID/stat); ok is false when pid is gone or a zombie.
func procStart(pid int) (start uint64, ok bool) {
	if pid <= 0 {
		return 0, false
	}
	fields, ok := procStat(pid)
	if !ok || len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return start, err == nil
}

// procStat returns the fields of /proc/PID/stat after the command name:
// [0] is the state (field 3), [1] the parent pid.
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// maxProcs bounds the scan of /proc.
const maxProcs = 1 << 16

// treePSS is the PSS, in bytes, of pid and all its descendants together:
// the memory a session costs (each shared page counted once overall).
// Processes whose smaps_rollup cannot be read count as 0.
func treePSS(pid int) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	children := map[int][]int{}
	for i, e := range ents {
		if i >= maxProcs {
			break
		}
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := procStat(p); ok && len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	var sum int64
	seen := map[int]bool{}
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if seen[p] {
			continue
		}
		seen[p] = true
		sum += pss(p)
		queue = append(queue, children[p]...)
	}
	return sum
}

// pss reads the Pss line of /proc/PID/smaps_rollup, in bytes.
func pss(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for lines := 0; sc.Scan() && lines < 64; lines++ {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
