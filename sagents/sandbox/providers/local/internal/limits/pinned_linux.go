//go:build linux

package limits

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// StartPinned starts cmd from an OS thread kept until the process ends.
// A child's parent-death signal (SysProcAttr.Pdeathsig) follows the
// thread that forked it, not the process, and a Go thread ends when a
// goroutine locked to it returns locked (each sandbox's cgroup thread
// does so at its Close; so do supervisor.OffMainThread's): a bwrap forked
// from an ordinary thread that such a goroutine takes later was killed
// with that thread, its session sandbox gone between two commands. A
// command without a parent-death signal is started as usual.
func StartPinned(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Pdeathsig == 0 {
		return cmd.Start()
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // this goroutine's thread: no other goroutine runs on it, none ends it
		err := cmd.Start()
		var pidfd int
		if err == nil {
			pidfd, err = unix.PidfdOpen(cmd.Process.Pid, 0)
			if err != nil { // gone (and reaped) already, or no pidfd: the start stands
				pidfd = -1
			}
			started <- nil
		} else {
			started <- err
			pidfd = -1
		}
		if pidfd >= 0 {
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err != unix.EINTR {
					break
				}
			}
			unix.Close(pidfd)
		}
		runtime.UnlockOSThread()
	}()
	return <-started
}
