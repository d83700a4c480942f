//go:build linux

package limits

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestStartPinnedOutlivesTheThread: a child with a parent-death signal
// started from a goroutine whose thread then ends (a goroutine that
// returns locked, as a sandbox's cgroup thread does at its Close) lives
// on: StartPinned forks it from a thread of its own, kept until it ends.
func TestStartPinnedOutlivesTheThread(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	start := func() {
		runtime.LockOSThread() // returns locked: the thread ends
		started <- StartPinned(cmd)
	}
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() != syscall.Getpid() {
			start()
			return
		}
		// The main thread does not end: another one, while this
		// goroutine holds the main one (as supervisor.OffMainThread).
		ended := make(chan struct{})
		go func() { defer close(ended); start() }()
		<-ended
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the child died with the thread that asked for it: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	cmd.Process.Kill()
	<-exited
}
