//go:build !linux

package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Processes lists the live host processes, this one aside, whose command
// line contains every one of parts (from ps(1), where there is no /proc).
func Processes(parts ...string) []int {
	out, _ := exec.Command("ps", "-axww", "-o", "pid=,stat=,command=").Output()
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[1], "Z") {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd := strings.Join(f[2:], " ")
		all := true
		for _, p := range parts {
			all = all && strings.Contains(cmd, p)
		}
		if all {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ChildAttr is a test's child process's SysProcAttr: in a process group of
// its own when pgid (there is no parent-death signal outside Linux).
func ChildAttr(pgid bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: pgid}
}
