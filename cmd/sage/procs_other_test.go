//go:build !linux

package main

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/sage-go/sage/internal/testenv"
)

// running lists the live processes whose command line contains every one
// of parts.
func running(parts ...string) []int { return testenv.Processes(parts...) }

// runningWith lists the live processes whose environment holds the
// variable kv (K=V), from ps(1)'s -E listing (there is no /proc): what a
// run started, whatever its command line.
func runningWith(kv string) []int {
	out, _ := exec.Command("ps", "-E", "-axww", "-o", "pid=,command=").Output()
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err == nil && pid != os.Getpid() && slices.Contains(f[1:], kv) {
			pids = append(pids, pid)
		}
	}
	return pids
}
