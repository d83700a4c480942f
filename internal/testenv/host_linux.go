//go:build linux

package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Processes lists the live (not zombie) host processes, this one aside,
// whose command line contains every one of parts: what a test finds left
// of a sandbox it stopped.
func Processes(parts ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !Alive(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		line := strings.ReplaceAll(string(cmdline), "\x00", " ")
		all := len(line) > 0
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Children lists the live processes whose parent is ppid.
func Children(ppid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !Alive(pid) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := strings.LastIndexByte(string(stat), ')')
		if f := strings.Fields(string(stat[i+1:])); i > 0 && len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Alive reports whether pid runs (a zombie does not).
func Alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(stat), ')')
	return err == nil && i > 0 && !strings.HasPrefix(string(stat[i+1:]), " Z")
}

// MountsUnder lists the mount points of this mount namespace at or below
// dir (a removed one's too: its path stays in the mount table).
func MountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], strings.TrimSuffix(dir, "/")+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// CgroupsMatching lists the cgroup directories matching the glob pattern
// (sage-NAME-*, say) below this process's own cgroup, in every hierarchy:
// where local mode makes a sandbox's.
func CgroupsMatching(pattern string) []string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || strings.HasPrefix(parts[1], "name=") {
			continue
		}
		ctl := strings.Split(parts[1], ",")[0] // "" for cgroup v2
		m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctl, parts[2], pattern))
		out = append(out, m...)
	}
	return out
}

// ChildAttr is a test's child process's SysProcAttr: in a process group of
// its own when pgid, and killed with SIGKILL when the test process dies
// (the parent-death signal), so that a killed test leaves no server.
func ChildAttr(pgid bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: pgid, Pdeathsig: syscall.SIGKILL}
}
