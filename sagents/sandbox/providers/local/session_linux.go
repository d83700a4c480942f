//go:build linux

package local

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/netbridge"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// sandboxSupervisor is where the supervisor program (this one, or a
// sage-supervisor) appears inside a session sandbox, under the name that
// makes this program serve as the supervisor.
const sandboxSupervisor = "/run/sage/bin/" + supervisor.Name

// sessionStartTimeout bounds the start of a session sandbox.
const sessionStartTimeout = 10 * time.Second

// drainAfterExit is how long output is still read after a command
// exited: a process it left running in the background ("cmd &") may hold
// the pipes for the rest of the session.
const drainAfterExit = 200 * time.Millisecond

// liveSession is one running session sandbox: bwrap, whose command is the
// supervisor, and the host end of its control socket.
type liveSession struct {
	cmd   *exec.Cmd
	w     *wrapped
	conn  *net.UnixConn
	binds []bind // what it shows besides the workspace and mounts
	wmu   sync.Mutex
	mu    sync.Mutex
	next  uint64
	waits map[uint64]chan supervisor.Reply
	busy  int
	tasks int // of busy, the background tasks running (checkpoints wait for the others only)
	used  time.Time
	dead  chan struct{} // closed once the supervisor is gone
	// killed: the host killed it (kill), as good as dead before dead closes
	killed atomic.Bool
	wsDev  uint64 // the workspace directory bound at the start
	wsIno  uint64
	log    *sessionLog // what bwrap and the supervisor write, on its way to session.log
	once   sync.Once
}

// sessionRun runs inv in the session sandbox, starting it first when
// none runs (or the last one died or went idle).
func (s *Sandbox) sessionRun(ctx context.Context, inv invocation, opts driver.ExecOptions) (*driver.CommandResult, error) {
	l, restarted, req, k, err := s.sessionCommand(ctx, inv)
	if err != nil {
		return nil, err
	}
	defer k.Release()
	if opts.Resident { // checkpoints are taken beside it (quiet)
		l.taskCount(1)
		defer l.taskCount(-1)
	}
	res, err := l.exec(ctx, req, opts, driver.CommandTimeout(opts.Timeout, s.timeout), k)
	if res != nil {
		le := s.iso.LimitsEnforced()
		res.LimitsEnforced = &le
		res.SessionRestarted = restarted
		s.budgetEnd(res)
	}
	return res, err
}

// sessionCommand takes the session sandbox for inv (starting it when
// none runs; restarted as for session) and makes inv's request to its
// supervisor with the command's own CPU budget: a cgroup it is put in
// before its first instruction, removed (with what is left in it) by
// k.release (under gVisor k is nil: its RLIMIT_CPU). The caller owns one
// use of l, given back with l.idle; on error it owns nothing.
func (s *Sandbox) sessionCommand(ctx context.Context, inv invocation) (l *liveSession, restarted bool, req supervisor.Request, k *limits.CommandCgroup, err error) {
	l, restarted, err = s.session(ctx, inv.Binds)
	if err != nil {
		return nil, false, req, nil, err
	}
	if err := l.sameWorkspace(s); err != nil {
		l.idle()
		return nil, false, req, nil, err
	}
	req = s.sessionRequest(inv)
	if k, err = s.commandBudget(&req); err != nil {
		l.idle()
		return nil, false, req, nil, err
	}
	return l, restarted, req, k, nil
}

// session returns the running session sandbox, starting one when there
// is none or the last one's supervisor is gone; restarted is true when it
// replaced an earlier one. A session sandbox's mounts are fixed at its
// start: when need holds a bind the running one lacks (an interpreter
// prefix, a pip find-links directory), it is replaced by one that has it.
func (s *Sandbox) session(ctx context.Context, need []bind) (*liveSession, bool, error) {
	slot := &s.sess
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.closed {
		return nil, false, driver.ErrClosed
	}
	if l := slot.live; l != nil {
		missing := missingBinds(l.binds, need)
		slot.extra = appendMissing(slot.extra, missing...)
		select {
		case <-l.gone():
			l.stop()
			slot.live = nil
		default:
			if len(missing) > 0 {
				l.stop()
				slot.live = nil
				break
			}
			l.mu.Lock()
			l.busy++
			l.mu.Unlock()
			restarted := slot.restartUnreported
			slot.restartUnreported = false
			return l, restarted, nil
		}
	}
	l, err := s.startSession(ctx)
	if err != nil {
		return nil, false, err
	}
	if s.ckpt != nil { // the workspace's layers (checkpoint_linux.go)
		if err := s.ckpt.attach(l); err != nil {
			l.stop()
			return nil, false, err
		}
	}
	s.warmSession(ctx, l)
	l.busy = 1
	slot.live = l
	slot.started++
	slot.restartUnreported = false // this start is the one reported
	if d := slot.opts.idle(); d > 0 {
		s.armIdle(l, d)
	}
	return l, slot.started > 1, nil
}

// warmSession runs one empty command in a new gVisor session sandbox: the
// first command there pays for the Sentry's first fork and exec of the
// shell (0.15-0.5 s more than the next ones), which is part of starting the
// sandbox, not of a caller's command and its timeout. A failure is left for
// the next command to meet.
func (s *Sandbox) warmSession(ctx context.Context, l *liveSession) {
	if _, ok := s.iso.(*isolation.Gvisor); !ok {
		return
	}
	inv, err := s.prepare(driver.ExecOptions{}, shell, "-c", ":")
	if err == nil {
		_, err = l.exec(ctx, s.sessionRequest(inv), driver.ExecOptions{}, sessionStartTimeout, nil)
	}
	if err != nil {
		slog.Debug("local sandbox: warming the gVisor session sandbox failed", "err", err)
	}
}

// armIdle stops l once it has run no command for d.
func (s *Sandbox) armIdle(l *liveSession, d time.Duration) {
	var check func()
	check = func() {
		l.mu.Lock()
		idle := l.busy == 0 && time.Since(l.used) >= d
		left := d - time.Since(l.used)
		l.mu.Unlock()
		if !idle {
			if left <= 0 {
				left = d
			}
			time.AfterFunc(left, check)
			return
		}
		s.sess.mu.Lock()
		if s.sess.live == l {
			s.sess.live = nil
		}
		s.sess.mu.Unlock()
		l.stop()
	}
	time.AfterFunc(d, check)
}

// stopSession ends the session sandbox, if any (Close).
func (s *Sandbox) stopSession() {
	s.sess.mu.Lock()
	l := s.sess.live
	s.sess.live, s.sess.closed = nil, true
	s.sess.mu.Unlock()
	if l != nil {
		l.stop()
	}
}

// sessionLaunch is what one isolation contributes to starting a session
// sandbox; the rest (the supervisor's binds, the control socket, the log,
// the process, the reply reader) is the same for bwrap and gVisor.
type sessionLaunch struct {
	what string // the sandbox, in errors: "the session sandbox"
	// argv is the supervisor's command line; a "--fd ?" in the wrapped
	// command line is filled with the control socket's descriptor.
	argv []string
	caps []string // the supervisor's capabilities, where the backend grants any (gVisor)
	// stdio: the control socket is the process's stdin, not an extra
	// descriptor (a gVisor session with checkpoints).
	stdio bool
}

// bwrapSessionLaunch starts bwrap with the supervisor as its command,
// under the same mounts, seccomp filter, uid, cgroups and rlimits as any
// command; the control socket follows bwrap's own descriptors.
func (s *Sandbox) bwrapSessionLaunch() sessionLaunch {
	// One P: the supervisor only waits on its socket and its children,
	// and every P costs memory (its mcache, a thread) in each session.
	// The supervisor sets the umask itself (no shell in front of it).
	argv := []string{sandboxSupervisor, "--fd", "?", "--umask", fmt.Sprintf("%03o", s.umask), "--protocol", strconv.Itoa(supervisor.Protocol),
		"--domains", onOff(commandDomains), "--signals", commandSignals}
	if s.limits.Pids > 0 {
		argv = append(argv, "--nproc", strconv.Itoa(s.limits.Pids))
	}
	return sessionLaunch{what: "the session sandbox", argv: argv}
}

// The session sandbox's protections (#31) the red-team tests switch off
// one at a time, in their controls (the backends' are
// isolation.ProtectFDs and the rest): each command in a Landlock domain
// of its own, the host ending a command the supervisor did not end, the
// session's output through a pipe (no host file inside). Always on
// otherwise.
var (
	commandDomains      = true
	hostEnforcesTimeout = true
	sessionLogPipe      = true
)

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// startSession starts the session sandbox of this sandbox's isolation,
// with the supervisor program SessionOptions.Supervisor picks
// (session_supervisor_linux.go).
func (s *Sandbox) startSession(ctx context.Context) (*liveSession, error) {
	prog, named := s.sess.opts.supervisorProgram()
	l, err := s.launchSession(ctx, prog)
	if err != nil || prog == "" || verified(prog) {
		return l, err
	}
	if err = l.handshake(prog); err == nil {
		return l, nil
	}
	l.stop()
	if named {
		return nil, err
	}
	refuseSupervisor(prog, err)
	return s.launchSession(ctx, "")
}

// launchSession starts the session sandbox with the supervisor program
// prog ("": this program, re-executed).
func (s *Sandbox) launchSession(ctx context.Context, prog string) (_ *liveSession, err error) {
	var sl sessionLaunch
	switch iso := s.iso.(type) {
	case *isolation.Gvisor:
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sl = gvisorSessionLaunch(iso)
	case *isolation.Bwrap:
		sl = s.bwrapSessionLaunch()
	default:
		return nil, fmt.Errorf("%w: the session sandbox needs bwrap isolation", driver.ErrIsolationUnavailable)
	}
	exe, name, err := prog, supervisor.Name, error(nil)
	if prog == "" {
		// This program: its reachable copy is the network bridge's.
		exe, err = bridgeExecutable()
		name = netbridge.Name
	}
	if err == nil {
		exe, err = reachableCopy(exe, s.runtimeDir, name, s.ident)
	}
	if err != nil {
		return nil, err
	}
	chdir := s.iso.VirtualWorkspace()
	if s.ckpt != nil { // not in the workspace: its mount is replaced under it
		chdir = "/"
	}
	inv := invocation{Argv: sl.argv, Workdir: s.hostWS, Chdir: chdir, Session: true, Caps: sl.caps,
		Env: map[string]string{"GOMAXPROCS": "1"}}
	if err := s.sessionBinds(&inv); err != nil {
		return nil, err
	}
	binds := append([]bind{}, inv.Binds...)
	inv.Binds = append(inv.Binds, bind{Host: exe, Inside: sandboxSupervisor, ReadOnly: true})
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("local: session control socket: %w", err)
	}
	host, inside := os.NewFile(uintptr(sp[0]), "session-control"), os.NewFile(uintptr(sp[1]), "session-control")
	defer inside.Close()
	defer host.Close()
	w, err := s.iso.Wrap(inv)
	if err != nil {
		return nil, err
	}
	files := append([]*os.File{}, w.ExtraFiles...)
	if !sl.stdio {
		files = append(files, inside)
	}
	for i := len(w.Args) - 1; i > 0; i-- { // the supervisor's --fd, at the end
		if w.Args[i-1] == "--fd" && w.Args[i] == "?" {
			w.Args[i] = strconv.Itoa(2 + len(files))
			break
		}
	}
	log, err := openSessionLog(filepath.Join(s.runtimeDir, "session.log"))
	if err != nil {
		closeFiles(w.ExtraFiles)
		w.Done()
		return nil, err
	}
	defer log.w.Close()
	cmd := &exec.Cmd{Path: w.Path, Args: w.Args, Dir: w.Dir, Env: w.Env, Stdout: log.w, Stderr: log.w, ExtraFiles: files}
	if sl.stdio {
		cmd.Stdin = inside
	}
	cmd.SysProcAttr = w.SysProcAttr()
	cmd.SysProcAttr.Setpgid = true
	if w.Start != nil {
		err = w.Start(cmd)
	} else {
		err = limits.StartPinned(cmd) // its parent-death signal follows the forking thread
	}
	closeFiles(w.ExtraFiles)
	if err != nil {
		log.abandon()
		w.Done()
		return nil, fmt.Errorf("local: start %s: %w", sl.what, err)
	}
	log.start()
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		w.Done()
	}
	if err := w.Started(cmd.Process.Pid); err != nil {
		kill()
		return nil, err
	}
	c, err := net.FileConn(host)
	if err != nil {
		kill()
		return nil, fmt.Errorf("local: session control socket: %w", err)
	}
	l := &liveSession{cmd: cmd, w: w, conn: c.(*net.UnixConn), binds: binds, used: time.Now(), log: log,
		waits: map[uint64]chan supervisor.Reply{}, dead: make(chan struct{})}
	l.wsDev, l.wsIno, _ = workspaceID(s)
	go l.read()
	return l, nil
}

// workspaceID identifies the workspace directory, opened as every
// command's bind is (no symlink on its path, still the session uid's).
func workspaceID(s *Sandbox) (dev, ino uint64, err error) {
	f, err := uids.OpenWorkspace(s.bindWS, s.ident)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, 0, err
	}
	return st.Dev, st.Ino, nil
}

// sameWorkspace checks, before every command, that the workspace is
// still the directory the session bound: one swapped for a symlink or
// another directory fails the command with fs.ErrPermission.
func (l *liveSession) sameWorkspace(s *Sandbox) error {
	dev, ino, err := workspaceID(s)
	if err != nil {
		return err
	}
	if dev != l.wsDev || ino != l.wsIno {
		return &fs.PathError{Op: "open workspace", Path: s.hostWS, Err: fmt.Errorf("%w: not the directory the session sandbox bound", fs.ErrPermission)}
	}
	return nil
}

// SessionPID is the host pid of the running session sandbox (bwrap), 0
// when none runs.
func (s *Sandbox) SessionPID() int {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	if s.sess.live == nil {
		return 0
	}
	select {
	case <-s.sess.live.gone():
		return 0
	default:
		return s.sess.live.cmd.Process.Pid
	}
}

// gone is closed once the session sandbox is dead, or at once when the
// host killed it.
func (l *liveSession) gone() <-chan struct{} {
	if l.killed.Load() {
		return closed
	}
	return l.dead
}

// closed is a closed channel.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// dropSession stops the running session sandbox; the next command starts
// a new one.
func (s *Sandbox) dropSession() {
	s.sess.mu.Lock()
	l := s.sess.live
	s.sess.live = nil
	s.sess.mu.Unlock()
	if l != nil {
		l.stop()
	}
}
