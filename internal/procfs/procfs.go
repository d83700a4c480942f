package procfs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// maxProcs bounds the scan of /proc.
const maxProcs = 1 << 16

// maxStat bounds a read of /proc/PID/stat (about 300 bytes in practice;
// the command name is at most 64).
const maxStat = 4 << 10

// Stat returns the fields of /proc/PID/stat after the command name: [0]
// is the state (field 3 of proc(5)), [1] the parent pid, [19] the start
// time. ok is false when pid is gone or its stat cannot be read.
func Stat(pid int) (fields []string, ok bool) {
	if pid <= 0 {
		return nil, false
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b := make([]byte, maxStat)
	n, _ := f.Read(b)
	i := bytes.LastIndexByte(b[:n], ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1 : n])), true
}

// Tree returns pid and all its descendants, pid first, each once.
func Tree(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
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
		if f, ok := Stat(p); ok && len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	var out []int
	seen := map[int]bool{}
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out
}

// PSS reads the Pss line of /proc/PID/smaps_rollup, in bytes; 0 when it
// cannot be read.
func PSS(pid int) int64 {
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

// TreePSS is the PSS, in bytes, of pid and all its descendants together
// (each shared page counted once overall, as PSS divides it among its
// sharers). Processes whose smaps_rollup cannot be read count as 0.
func TreePSS(pid int) int64 {
	var sum int64
	for _, p := range Tree(pid) {
		sum += PSS(p)
	}
	return sum
}
