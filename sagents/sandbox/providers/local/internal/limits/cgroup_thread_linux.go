//go:build linux

package limits

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// A process is born in the cgroups of the thread that forks it. Moving
// one into a cgroup later (the gate's join) takes the kernel's
// threadgroup lock for writing, which waits for an RCU grace period
// unless one passed since the lock was last taken: 2 to 16 ms measured
// here, so a session sandbox's start waited at the gate in a third of
// its starts, 2 ms on average, even with the lock primed
// (cgroup_prime_linux.go). So a bwrap sandbox on cgroup v1 keeps one host
// thread in its cgroups (moved there once, in the background, when the
// sandbox opens) and forks its bwrap processes from it (the session
// sandbox's; with fresh_per_command, each command's): bwrap and
// everything under it are born in the cgroups, and the gate has nothing
// left to move. cgroup v2 moves threads only within threaded cgroups,
// and has CLONE_INTO_CGROUP for this instead; there the gate's join
// stays.
//
// The thread is a host thread, one per open sandbox. It counts as one
// task of the pids cgroup (pids.max is raised by one for it). Its
// memory stays this process's (user pages are charged to the memory
// cgroup of the process's leader, never this thread: supervisor.OffMainThread), and
// the memory cgroup's OOM killer, which picks among processes by their
// leader, never picks this process. It must be out of the cgroups before
// they are removed, since cgroup.procs then lists this process: remove
// ends the thread first, and removeCgroup never kills this process.

// cgroupThread is a locked OS thread in a Cgroups's hierarchies that
// runs the functions sent on work.
type cgroupThread struct {
	work  chan func()
	ready chan struct{} // closed once the thread is in the cgroups, or could not be
	in    bool          // set before ready closes: the thread is in every hierarchy
	err   error         // set before ready closes: why not
	left  chan struct{} // closed as the thread ends
}

// ThreadJoinTimeout bounds the thread's join and its end.
const ThreadJoinTimeout = 10 * time.Second

// StartThread starts the cgroup thread of a v1 set (nothing for v2, or
// with nothing to join). The join happens in the background: until it is
// done, start forks from any thread and the gate joins.
func (c *Cgroups) StartThread() {
	if c == nil || len(c.procs) == 0 || fileExists(filepath.Join(cgroupRoot, "cgroup.controllers")) {
		return
	}
	t := &cgroupThread{work: make(chan func()), ready: make(chan struct{}), left: make(chan struct{})}
	c.mu.Lock()
	c.thread = t
	procs := slices.Clone(c.procs)
	c.mu.Unlock()
	setPidsMax(procs, c.pidsMax, 1) // the thread is a task of the pids cgroup: one more for it
	supervisor.OffMainThread(func() { t.run(procs, c.pidsMax) })
}

// setPidsMax sets pids.max, in the hierarchy of procs that has it, to
// the pids limit max plus extra (no lock: run calls it while remove may
// hold mu).
func setPidsMax(procs []string, max, extra int) {
	if max <= 0 {
		return
	}
	for _, p := range procs {
		if f := filepath.Join(filepath.Dir(p), "pids.max"); fileExists(f) {
			os.WriteFile(f, []byte(strconv.Itoa(max+extra)), 0)
		}
	}
}

// run, on its locked thread: join, then serve work until it is closed.
// It returns with the thread still locked, which ends the thread:
// leaving the cgroups that way takes no move, so no grace period either
// (removeCgroup retries its rmdir until the thread is gone).
func (t *cgroupThread) run(procs []string, pidsMax int) {
	defer close(t.left)
	tid := []byte(strconv.Itoa(unix.Gettid()))
	var err error
	for _, p := range procs {
		if err = os.WriteFile(filepath.Join(filepath.Dir(p), "tasks"), tid, 0); err != nil {
			err = fmt.Errorf("local: cgroup thread: %w", err)
			break
		}
	}
	if err == nil {
		err = InCgroups("/proc/thread-self/cgroup", procs)
	}
	t.in, t.err = err == nil, err
	if !t.in {
		slog.Debug("local sandbox: the cgroup thread could not join; the gate moves bwrap's child instead", "err", err)
		setPidsMax(procs, pidsMax, 0)
	}
	close(t.ready)
	if t.in {
		for f := range t.work {
			f()
		}
	}
}

// hierarchyOf is the v1 controller (the hierarchy's directory under
// cgroupRoot) of a cgroup file.
func hierarchyOf(file string) string {
	rel, _ := filepath.Rel(cgroupRoot, file)
	ctl, _, _ := strings.Cut(rel, "/")
	return ctl
}

// InCgroups fails unless the task whose /proc cgroup file is file
// ("/proc/thread-self/cgroup", "/proc/PID/cgroup") is in the cgroup of
// each of procs.
func InCgroups(file string, procs []string) error {
	own, err := readCgroups(file)
	if err != nil {
		return err
	}
	for _, p := range procs {
		ctl := hierarchyOf(p)
		if filepath.Join(cgroupRoot, ctl, own[ctl]) != filepath.Dir(p) {
			return fmt.Errorf("local: %s: not in %s", file, filepath.Dir(p))
		}
	}
	return nil
}

// Start starts cmd born in the cgroups when the cgroup thread is in them
// (born true), else as usual (born false: the gate must join).
func (c *Cgroups) Start(cmd *exec.Cmd) (born bool, err error) {
	if c == nil {
		return false, StartPinned(cmd)
	}
	c.mu.Lock()
	if c.removed || !c.threadIn() { // none, or still joining: not worth waiting for
		c.mu.Unlock()
		return false, StartPinned(cmd)
	}
	done := make(chan error, 1)
	c.thread.work <- func() { done <- cmd.Start() } // under mu: remove cannot close work meanwhile
	c.mu.Unlock()
	return true, <-done
}

// threadIn says, with mu held, whether the cgroup thread is in the
// cgroups: bwrap started now is born there.
func (c *Cgroups) threadIn() bool {
	if c.thread == nil {
		return false
	}
	select {
	case <-c.thread.ready:
		return c.thread.in
	default:
		return false
	}
}

// stopThread ends the cgroup thread (remove, with mu held); an error
// means it may still be in the cgroups.
func (c *Cgroups) stopThread() error {
	t := c.thread
	if t == nil {
		return nil
	}
	c.thread = nil
	select {
	case <-t.ready:
	case <-time.After(ThreadJoinTimeout):
		return errors.New("local: cgroup thread: its join did not end")
	}
	close(t.work)
	select {
	case <-t.left:
	case <-time.After(ThreadJoinTimeout):
		return errors.New("local: cgroup thread: it did not end")
	}
	return nil
}

// WaitThread waits up to timeout for the cgroup thread to be in the
// cgroups or to fail joining them: started is false when the set has no
// thread (cgroup v2, or nothing to join); err says why the join failed,
// or that it did not end in time.
func (c *Cgroups) WaitThread(timeout time.Duration) (started bool, err error) {
	c.mu.Lock()
	t := c.thread
	c.mu.Unlock()
	if t == nil {
		return false, nil
	}
	select {
	case <-t.ready:
		return true, t.err
	case <-time.After(timeout):
		return true, errors.New("local: cgroup thread: its join did not end within " + timeout.String())
	}
}

// StopThread ends the cgroup thread, as Remove does first; commands
// started afterwards join at the gate. An error means the thread may
// still be in the cgroups.
func (c *Cgroups) StopThread() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopThread()
}
