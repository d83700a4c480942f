//go:build linux

package layers

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StartOptions say how to reach a running sandbox.
type StartOptions struct {
	Bwrap string // bwrap's path
	Exe   string // a program linking this package, reachable as Cred
	// Pid is a process in the sandbox's inner user namespace (B), whose
	// mount namespace the agent enters.
	Pid  int
	Cred *syscall.Credential // run bwrap as this uid (nil: the caller's)
	Log  io.Writer           // bwrap's and the agent's stderr (nil: discarded)
}

// Agent is the host's end of a running agent. Its methods are safe for
// concurrent use (they run one at a time).
type Agent struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	sock *os.File
	buf  []byte
	// release lets the thread that forked the agent go (Close)
	release chan struct{}
}

// Start starts the agent for the sandbox of o.Pid and waits for it to
// answer.
func Start(o StartOptions) (*Agent, error) {
	userNS, mntNS, err := namespaces(o.Pid)
	if err != nil {
		return nil, err
	}
	defer userNS.Close()
	defer mntNS.Close()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("layers: socket: %w", err)
	}
	host, inside := os.NewFile(uintptr(sp[0]), "layers-host"), os.NewFile(uintptr(sp[1]), "layers-agent")
	// bwrap enters A (its fd 5) and runs the agent, whose argv[0] is
	// o.Exe: its base name must be Name.
	cmd := exec.Command(o.Bwrap, "--userns", "5", "--cap-add", "ALL", "--bind", "/", "/", "--dev-bind", "/dev", "/dev",
		"--die-with-parent", "--", o.Exe)
	cmd.ExtraFiles = []*os.File{mntNS, inside, userNS} // 3, 4, 5
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: o.Cred, Setpgid: true}
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	if o.Log != nil {
		cmd.Stderr = io.MultiWriter(stderr, o.Log)
	}
	// The parent death signal (Pdeathsig, bwrap's --die-with-parent)
	// follows the thread that forked, not the process: bwrap is forked
	// from a thread kept for the agent's life, which no locked goroutine
	// ending elsewhere can take down with it.
	started, release := make(chan error), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		started <- cmd.Start()
		<-release
		runtime.UnlockOSThread()
	}()
	err = <-started
	inside.Close() // the agent's now: its exit is the host's EOF
	if err != nil {
		close(release)
		host.Close()
		return nil, fmt.Errorf("layers: start the agent: %w", err)
	}
	a := &Agent{cmd: cmd, sock: host, buf: make([]byte, 64<<10), release: release}
	// The agent answers a first request once it entered the namespace
	// (or says why it could not).
	if _, err := a.call(request{Op: "hello"}, 10*time.Second); err != nil {
		a.Close()
		if msg := stderr.String(); msg != "" {
			return nil, fmt.Errorf("%w (bwrap: %s)", err, msg)
		}
		return nil, err
	}
	return a, nil
}

// namespaces opens pid's mount namespace and the parent of its user
// namespace (NS_GET_PARENT), which owns the mount namespace.
func namespaces(pid int) (userNS, mntNS *os.File, err error) {
	inner, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return nil, nil, fmt.Errorf("layers: the sandbox's user namespace: %w", err)
	}
	defer inner.Close()
	fd, err := unix.IoctlRetInt(int(inner.Fd()), unix.NS_GET_PARENT)
	if err != nil {
		return nil, nil, fmt.Errorf("layers: the parent of the sandbox's user namespace: %w", err)
	}
	userNS = os.NewFile(uintptr(fd), "userns")
	if mntNS, err = os.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err != nil {
		userNS.Close()
		return nil, nil, fmt.Errorf("layers: the sandbox's mount namespace: %w", err)
	}
	return userNS, mntNS, nil
}

// OpError is an operation the agent refused or failed; Errno is the
// system's error number when there was one (EBUSY: a file is open for
// writing in the mount to freeze).
type OpError struct {
	Op    string
	Msg   string
	Errno syscall.Errno
}

func (e *OpError) Error() string { return "layers: " + e.Op + ": " + e.Msg }

// Unwrap is the errno (errors.Is(err, syscall.EBUSY)).
func (e *OpError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// Layout is one overlay: read-only layers (topmost first) and, for a
// writable one, an upper and a work directory on one file system; Target
// is where Mount attaches it inside the sandbox. Paths are as the agent
// sees them: the host's, and the stores it mounted (Store).
type Layout struct {
	Lowers      []string
	Upper, Work string
	Target      string
}

// Mount mounts each layout at its target inside the sandbox in place of
// what is there, and returns the new mounts in order (the caller closes
// them). Every overlay is built before the first is attached, so a bad
// layer changes nothing; an attach failing after an earlier one worked is
// ENOTRECOVERABLE (the earlier targets have their new mounts).
func (a *Agent) Mount(ls ...Layout) ([]*os.File, error) {
	return a.Swap(nil, ls...)
}

// Swap is Freeze of the mounts at freeze, then Mount of ls, in one
// request (a checkpoint: the upper frozen, a new overlay on top). An
// error before the first attach leaves everything as it was, thawed.
func (a *Agent) Swap(freeze []string, ls ...Layout) ([]*os.File, error) {
	req := request{Op: "mount", Freeze: freeze}
	for _, l := range ls {
		req.Mounts = append(req.Mounts, mountSpec{Lowers: l.Lowers, Upper: l.Upper, Work: l.Work, Target: l.Target})
	}
	r, err := a.call(req, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if len(r.files) != len(ls) {
		closeFiles(r.files)
		return nil, &OpError{Op: "mount", Msg: fmt.Sprintf("%d mounts in the reply, want %d", len(r.files), len(ls))}
	}
	return r.files, nil
}

// Prepare builds the overlays of ls ahead of a Mount or Swap of the same
// layouts (to the byte), which then attaches them without building; the
// next Mount or Swap drops those it did not take. Each layout's upper
// must be its own: no other mount may use it before that next Mount.
func (a *Agent) Prepare(ls ...Layout) error {
	req := request{Op: "prepare"}
	for _, l := range ls {
		req.Mounts = append(req.Mounts, mountSpec{Lowers: l.Lowers, Upper: l.Upper, Work: l.Work, Target: l.Target})
	}
	_, err := a.call(req, 30*time.Second)
	return err
}

// View returns a detached read-only overlay of lowers (topmost first).
func (a *Agent) View(lowers []string) (*os.File, error) {
	r, err := a.call(request{Op: "view", Lowers: lowers}, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if len(r.files) != 1 {
		closeFiles(r.files)
		return nil, &OpError{Op: "view", Msg: "no mount in the reply"}
	}
	return r.files[0], nil
}

// Freeze makes the mounts last attached at targets read-only; it fails
// with EBUSY while a file is open for writing in one of them, and then
// leaves all writable.
func (a *Agent) Freeze(targets ...string) error {
	_, err := a.call(request{Op: "freeze", Targets: targets}, 10*time.Second)
	return err
}

// Thaw makes them writable again (a checkpoint that failed after Freeze).
func (a *Agent) Thaw(targets ...string) error {
	_, err := a.call(request{Op: "thaw", Targets: targets}, 10*time.Second)
	return err
}

// Store mounts a new tmpfs of size bytes (0: tmpfs's default) at path in
// the agent's own mount namespace, where only the agent's overlays reach
// it, for the layers of target (a sandbox's /tmp): it returns the
// tmpfs's root, through which the host reaches it, and target's
// permission bits. A target with mounts under it is refused (ENOTEMPTY):
// an overlay there would hide them.
func (a *Agent) Store(target, path string, size int64) (*os.File, fs.FileMode, error) {
	r, err := a.call(request{Op: "store", Target: target, Path: path, Size: size}, 10*time.Second)
	if err != nil {
		return nil, 0, err
	}
	if len(r.files) != 1 {
		closeFiles(r.files)
		return nil, 0, &OpError{Op: "store", Msg: "no directory in the reply"}
	}
	m := fs.FileMode(r.Mode & 0o777)
	if r.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return r.files[0], m, nil
}

// CopyIn copies the state of lowers (topmost first) into the directory
// dst with the agent's rights: into a store, whose files the host cannot
// create as root (the tmpfs takes only the sandbox's uids).
func (a *Agent) CopyIn(dst string, lowers []string) error {
	_, err := a.call(request{Op: "copy", Path: dst, Lowers: lowers}, 5*time.Minute)
	return err
}

// answer is a reply with the descriptors that came with it.
type answer struct {
	reply
	files []*os.File
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (a *Agent) call(req request, timeout time.Duration) (answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return answer{}, &OpError{Op: req.Op, Msg: "agent stopped", Errno: syscall.ESRCH}
	}
	b, _ := json.Marshal(req)
	if _, err := a.sock.Write(b); err != nil {
		return answer{}, &OpError{Op: req.Op, Msg: "agent gone: " + err.Error(), Errno: syscall.ESRCH}
	}
	if err := waitReadable(int(a.sock.Fd()), timeout); err != nil {
		return answer{}, &OpError{Op: req.Op, Msg: "no answer: " + err.Error(), Errno: syscall.ETIMEDOUT}
	}
	oob := make([]byte, unix.CmsgSpace(4*maxFiles))
	n, oobn, _, _, err := unix.Recvmsg(int(a.sock.Fd()), a.buf, oob, 0)
	if err != nil || n == 0 {
		return answer{}, &OpError{Op: req.Op, Msg: fmt.Sprintf("agent gone (%v)", err), Errno: syscall.ESRCH}
	}
	var ans answer
	if oobn > 0 {
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					unix.CloseOnExec(fd)
					ans.files = append(ans.files, os.NewFile(uintptr(fd), "layers-mount"))
				}
			}
		}
	}
	if err := json.Unmarshal(a.buf[:n], &ans.reply); err != nil {
		closeFiles(ans.files)
		return answer{}, &OpError{Op: req.Op, Msg: "bad reply: " + err.Error()}
	}
	if ans.Err != "" {
		closeFiles(ans.files)
		return answer{}, &OpError{Op: req.Op, Msg: ans.Err, Errno: syscall.Errno(ans.Errno)}
	}
	return ans, nil
}

// maxFiles bounds the descriptors of one reply (a mount of each target).
const maxFiles = 8

// Close stops the agent (idempotent). The mounts it made stay: the
// sandbox's and the descriptors the host holds keep them.
func (a *Agent) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return nil
	}
	a.sock.Close()
	syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	a.cmd.Wait()
	a.cmd = nil
	close(a.release)
	return nil
}

// waitReadable waits until fd has something to read (or its peer left).
func waitReadable(fd int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return syscall.ETIMEDOUT
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
}

// tailBuffer keeps the first max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
