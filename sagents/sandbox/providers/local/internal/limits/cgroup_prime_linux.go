//go:build linux

package limits

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Moving a process into a cgroup (the gate's join) takes the kernel's
// global threadgroup lock for writing, and taking it waits for an RCU
// grace period unless one passed since the lock was last taken: several
// milliseconds, measured on the slowest path of a session sandbox's start
// (the sandbox's init waits for it at the gate). The wait does not need
// the process that will move: a move of any thread to the cgroup it is
// already in pays it too and leaves the lock cheap to take for about one
// grace period after. prime makes that no-op move in the background when
// a sandbox starts, so the wait overlaps bwrap's start and mounts instead
// of following them.

// Prime starts the wait the next join pays, in the background. It is an
// optimisation only: every error is ignored, and join stays the move
// that puts the sandbox into its cgroups.
func (c *Cgroups) Prime() {
	if c == nil {
		return
	}
	c.mu.Lock()
	procs := ""
	if len(c.procs) > 0 && !c.removed && !c.threadIn() {
		procs = c.procs[0]
	}
	c.mu.Unlock()
	if procs != "" {
		go primeMove(procs)
	}
}

// primeMove moves the calling thread to the cgroup it is in, in the
// hierarchy of procs (a cgroup.procs file of this set): cgroup v1's
// tasks file, cgroup v2's cgroup.threads, both of which move one thread.
func primeMove(procs string) {
	rel, err := filepath.Rel(cgroupRoot, filepath.Dir(procs))
	if err != nil || strings.HasPrefix(rel, "..") {
		return
	}
	v2 := fileExists(filepath.Join(cgroupRoot, "cgroup.controllers"))
	ctl, file := "", "cgroup.threads"
	if !v2 {
		ctl, file = hierarchyOf(procs), "tasks"
	}
	runtime.LockOSThread() // this thread's cgroup is read and written
	defer runtime.UnlockOSThread()
	own, err := readCgroups("/proc/thread-self/cgroup")
	if err != nil {
		return
	}
	if p, ok := own[ctl]; ok {
		os.WriteFile(filepath.Join(cgroupRoot, ctl, p, file), []byte(strconv.Itoa(unix.Gettid())), 0)
	}
}
