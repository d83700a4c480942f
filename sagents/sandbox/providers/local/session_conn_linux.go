//go:build linux

package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// read dispatches the supervisor's replies until it is gone.
func (l *liveSession) read() {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := l.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			break
		}
		var r supervisor.Reply
		jerr := r.UnmarshalBinary(buf[:n])
		if oobn > 0 {
			r.HostPid = pidfdHostPid(oob[:oobn])
		}
		if jerr != nil {
			continue
		}
		l.mu.Lock()
		ch := l.waits[r.ID]
		l.mu.Unlock()
		if ch != nil {
			select {
			case ch <- r:
			default:
			}
		}
	}
	close(l.dead)
}

// pidfdHostPid reads the pid, as this process sees it, of the pidfd
// the message carries (its fdinfo), and closes the pidfd.
func pidfdHostPid(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	pid := 0
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if pid == 0 {
				b, _ := limits.ReadSmall("/proc/self/fdinfo/" + strconv.Itoa(fd))
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "Pid:"); ok {
						pid, _ = strconv.Atoi(strings.TrimSpace(v))
					}
				}
			}
			unix.Close(fd)
		}
	}
	return pid
}

// stop ends the session sandbox: closing the control socket makes the
// supervisor kill its commands and exit; whatever is left is killed.
func (l *liveSession) stop() { l.once.Do(l.end) }

func (l *liveSession) end() {
	l.conn.Close()
	done := make(chan struct{})
	go func() { l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		// The sandbox's pid 1 is bwrap's child, in a session of its own:
		// killing bwrap's process group reaches it only through its
		// parent-death signal, later. Kill it too and wait for its end,
		// which comes once every process of its pid namespace is gone.
		inits := childPidfds(l.cmd.Process.Pid)
		syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		for _, fd := range inits {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			awaitPidfd(fd, 10*time.Second)
			unix.Close(fd)
		}
	}
	l.w.Done()
}

// childPidfds opens pidfds of ppid's children (found in /proc: this
// kernel may lack /proc/PID/task/TID/children). ppid has not been
// waited for, so a child's pid cannot have been reused by another
// process with that parent.
func childPidfds(ppid int) []int {
	ents, _ := os.ReadDir("/proc")
	var fds []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentOf(pid) != ppid {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if parentOf(pid) != ppid { // it ended and its pid went to another before the open
			unix.Close(fd)
			continue
		}
		fds = append(fds, fd)
	}
	return fds
}

// parentOf is pid's parent pid (0: unknown).
func parentOf(pid int) int {
	b, err := limits.ReadSmall("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// awaitPidfd waits, at most d, for the process of pidfd fd to end.
func awaitPidfd(fd int, d time.Duration) {
	deadline := time.Now().Add(d)
	for left := d; left > 0; left = time.Until(deadline) {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if n > 0 || err != nil && err != unix.EINTR {
			return
		}
	}
}

func (l *liveSession) send(req supervisor.Request, files ...*os.File) error {
	b, err := req.MarshalBinary()
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, _, err = l.conn.WriteMsgUnix(b, oob, nil)
	return err
}

// register gives req the session's next command id and a channel for
// the supervisor's replies to it; forget drops the channel.
func (l *liveSession) register(req *supervisor.Request) (ch chan supervisor.Reply, forget func()) {
	ch = make(chan supervisor.Reply, 2)
	l.mu.Lock()
	l.next++
	req.ID = l.next
	l.waits[req.ID] = ch
	l.mu.Unlock()
	id := req.ID
	return ch, func() { l.mu.Lock(); delete(l.waits, id); l.mu.Unlock() }
}

// idle marks a command done that never ran.
func (l *liveSession) idle() {
	l.mu.Lock()
	l.busy--
	l.used = time.Now()
	l.mu.Unlock()
}

// sessionUnresponsiveGrace is how long the host waits, after the SIGKILL
// of a command told to end, for the supervisor to say that it ended. Past
// it the host stops the whole session sandbox itself: a command's end
// never depends on anything inside the sandbox behaving (a supervisor
// stopped or wedged by what runs beside it). A timed-out or cancelled
// command so returns at most its timeout, driver.DefaultKillGrace and
// this after it started.
const sessionUnresponsiveGrace = time.Second

// exec runs one command in the session and waits for it, with its own
// timeout: on expiry it gets SIGTERM, then SIGKILL (every process of its
// Landlock domain, else its process group), and if the supervisor does
// not report its end by sessionUnresponsiveGrace after that, the host
// stops the session sandbox (the next command starts a new one).
func (l *liveSession) exec(ctx context.Context, req supervisor.Request, opts driver.ExecOptions, timeout time.Duration, k *limits.CommandCgroup) (res *driver.CommandResult, err error) {
	req.Gate = k != nil
	req.Quiet = !req.Gate && !req.Pidfd // only "exited" is waited for
	if k != nil {                       // RLIMIT_CPU: the per-process backstop, as in limits.go
		req.CPUSeconds = int((k.Budget()+time.Second-1)/time.Second) + 1
	}
	defer l.idle()
	var stdin *os.File
	if opts.Stdin == nil {
		if stdin, err = os.Open(os.DevNull); err != nil {
			return nil, err
		}
	}
	p, err := newPipes(opts, stdin)
	if err != nil {
		return nil, err
	}
	defer p.close()
	ch, forget := l.register(&req)
	defer forget()
	start := time.Now()
	err = l.send(req, p.child...)
	p.closeChild()
	if err != nil {
		return nil, fmt.Errorf("local: session sandbox: %w", err)
	}
	p.run(opts)
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	var kill, unresponsive <-chan time.Time
	killed := false
	for {
		select {
		case r := <-ch:
			switch r.Op {
			case "started":
				if req.Gate {
					if r.HostPid <= 0 {
						l.send(supervisor.Request{Op: "signal", ID: req.ID, Sig: int(syscall.SIGKILL)})
						return nil, fmt.Errorf("local: session sandbox: no pid for the command's CPU cgroup: %s", r.Err)
					}
					if err := k.Start(r.HostPid); err != nil {
						l.send(supervisor.Request{Op: "signal", ID: req.ID, Sig: int(syscall.SIGKILL)})
						return nil, err
					}
					l.send(supervisor.Request{Op: "release", ID: req.ID})
				}
				continue
			case "error":
				return nil, fmt.Errorf("local: session sandbox: %s", r.Err)
			}
			res := p.result(time.Since(start))
			res.ExitCode, res.Success = r.Exit, r.Exit == 0
			if r.Signal > 0 {
				res.Signal = unix.SignalName(syscall.Signal(r.Signal))
			}
			k.End(res)
			if killed {
				if ctx.Err() != nil {
					return res, fmt.Errorf("sandbox: command cancelled: %w", ctx.Err())
				}
				res.TimedOut, res.Success = true, false
			}
			return res, nil
		case <-l.dead:
			res := p.result(time.Since(start))
			res.ExitCode = -1
			return res, fmt.Errorf("local: session sandbox ended while the command ran: %w", io.ErrUnexpectedEOF)
		case <-runCtx.Done():
			runCtx = context.Background()
			killed = true
			l.send(supervisor.Request{Op: "signal", ID: req.ID, Sig: int(syscall.SIGTERM)})
			kill = time.After(driver.DefaultKillGrace)
		case <-kill:
			l.send(supervisor.Request{Op: "signal", ID: req.ID, Sig: int(syscall.SIGKILL)})
			if hostEnforcesTimeout {
				unresponsive = time.After(sessionUnresponsiveGrace)
			}
		case <-unresponsive:
			slog.Warn("local sandbox: the session's supervisor did not end a command told to end; stopping the session sandbox",
				"pid", l.cmd.Process.Pid)
			l.kill()
			res := p.result(time.Since(start))
			res.ExitCode, res.Signal = 128+int(syscall.SIGKILL), "SIGKILL"
			k.End(res)
			if ctx.Err() != nil {
				return res, fmt.Errorf("sandbox: command cancelled: %w", ctx.Err())
			}
			res.TimedOut = true
			return res, nil
		}
	}
}

// kill ends the session sandbox from the host at once, whatever runs in
// it: SIGKILL to bwrap's (or runsc's) process group, whose end takes the
// sandbox down (bwrap's parent-death signal on its pid 1, runsc's
// attached sandbox), then the usual stop in the background. The next
// command finds the session dead and starts a new one.
func (l *liveSession) kill() {
	l.killed.Store(true)
	syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
	go l.stop()
}
