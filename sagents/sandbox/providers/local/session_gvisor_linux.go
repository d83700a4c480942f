//go:build linux

package local

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// A gVisor session sandbox is one runsc sandbox per session whose init is
// the same supervisor as bwrap's (session_linux.go): the runsc start is
// paid once per session, and every command, background task and Python or
// JavaScript call runs on gVisor's kernel inside it.
//
// The control channel is one end of a host socketpair that runsc donates
// to the supervisor as its descriptor 3 (runsc run --pass-fd): inside,
// gVisor wraps it as a host-backed Unix socket that has no address, so no
// process in the sandbox can connect to it, and the supervisor (not
// dumpable, like under bwrap; so is the egress bridge, which holds a copy
// with network allowlist) is out of reach: gVisor's kernel refuses ptrace
// and reading or opening its /proc/PID/fd links (unlike Linux it lists
// their numbers and shows /proc/PID/fdinfo; a socket is never reopened
// through /proc there). Descriptors
// the host sends over it (each command's stdio pipes) become host-backed
// files inside; nothing crosses the other way (gVisor refuses to send
// descriptors to the host), so the supervisor sends no pidfd and the host
// never learns, or signals, a pid of a process inside: signals go through
// the supervisor by command id.
//
// Limits: the host cgroups around runsc (memory, pids, CPU) hold the
// whole session; the supervisor and so every command get RLIMIT_NPROC,
// RLIMIT_FSIZE and RLIMIT_CORE from the spec; each command's CPU budget
// is its RLIMIT_CPU inside gVisor's kernel (set before the command runs:
// soft at the budget, SIGXCPU; hard a second later, SIGKILL), since every
// process of the session is a thread of the same host processes (the
// Sentry) and a host cgroup cannot tell the commands apart; its RLIMIT_AS
// is set the same way. So the budget holds per process, not for the
// command's processes together as under bwrap, and the result's
// LimitsEnforced says so (rlimit-per-process).

// gvisorControlFD is the supervisor's control socket in a gVisor session
// sandbox (runsc run --pass-fd=3:gvisorControlFD).
const gvisorControlFD = 3

// startGvisorSession starts runsc with the supervisor as the sandbox's
// init, under the same spec (mounts, seccomp, uid, rlimits, host
// cgroups) as any command of isolation gvisor.
func (s *Sandbox) startGvisorSession(ctx context.Context, g *gvisorIsolator) (_ *liveSession, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	exe, err := bridgeExecutable()
	if err == nil {
		exe, err = reachableCopy(exe, s.runtimeDir, s.ident)
	}
	if err != nil {
		return nil, err
	}
	inv := invocation{argv: []string{sandboxSupervisor, "--fd", strconv.Itoa(gvisorControlFD)}, workdir: s.hostWS,
		chdir: g.virtualWS, session: true, env: map[string]string{"GOMAXPROCS": "1"}}
	if err := s.sessionBinds(&inv); err != nil {
		return nil, err
	}
	binds := append([]bind{}, inv.binds...)
	inv.binds = append(inv.binds, bind{host: exe, inside: sandboxSupervisor, readOnly: true})
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("local: session control socket: %w", err)
	}
	host, inside := os.NewFile(uintptr(sp[0]), "session-control"), os.NewFile(uintptr(sp[1]), "session-control")
	defer inside.Close()
	defer host.Close()
	w, err := g.wrap(inv)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(s.runtimeDir, "session.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		w.done()
		return nil, fmt.Errorf("local: session log: %w", err)
	}
	defer logf.Close()
	// runsc itself runs as root on the host, in the sandbox's cgroups
	// (w.path is the cgroup trampoline); the supervisor inside runs as the
	// session's uid. runsc run is attached: killed with this process
	// (parent-death signal), its sandbox goes with it.
	cmd := &exec.Cmd{Path: w.path, Args: w.args, Dir: w.dir, Env: w.env, Stdout: logf, Stderr: logf,
		ExtraFiles: []*os.File{inside}, SysProcAttr: sysProcAttr(nil)}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		w.done()
		return nil, fmt.Errorf("local: start the gVisor session sandbox: %w", err)
	}
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		w.done()
	}
	if err := w.started(cmd.Process.Pid); err != nil {
		kill()
		return nil, err
	}
	c, err := net.FileConn(host)
	if err != nil {
		kill()
		return nil, fmt.Errorf("local: session control socket: %w", err)
	}
	l := &liveSession{cmd: cmd, w: w, conn: c.(*net.UnixConn), binds: binds, used: time.Now(),
		waits: map[uint64]chan supervisor.Reply{}, dead: make(chan struct{})}
	l.wsDev, l.wsIno, _ = workspaceID(s)
	go l.read()
	return l, nil
}

// sessionEnvIso is what builds a session command's environment: the
// bwrap isolator, or for gVisor one with its workspace and egress proxy.
func (s *Sandbox) sessionEnvIso() *bwrapIsolator {
	if g, ok := s.iso.(*gvisorIsolator); ok {
		return &bwrapIsolator{virtualWS: g.virtualWS, egress: g.egress}
	}
	return s.iso.(*bwrapIsolator)
}

// commandBudget gives req its own CPU budget: under bwrap a host cgroup
// the command is put in before its first instruction; under gVisor its
// RLIMIT_CPU, set with its RLIMIT_AS by a shell in front of it (see the
// top of this file).
func (s *Sandbox) commandBudget(req *supervisor.Request) (*cmdCgroup, error) {
	if _, ok := s.iso.(*gvisorIsolator); ok {
		req.Argv = gvisorCommandLimits(s.limits, req.Argv)
		// Where bwrap's command cgroup takes the command's leftover
		// processes with it, its process group dies with its leader.
		req.GroupDies = s.limits.CPUTime > 0
		return nil, nil
	}
	return s.iso.(*bwrapIsolator).cg.command(s.limits.CPUTime)
}

// gvisorCommandLimits puts a shell in front of argv that sets the limits
// a gVisor session's supervisor does not carry, since they are each
// command's: RLIMIT_CPU (soft at the budget, hard a second later) and
// RLIMIT_AS (which a Go supervisor could not even start under).
func gvisorCommandLimits(l Limits, argv []string) []string {
	var set []string
	if l.CPUTime > 0 {
		soft := int64((l.CPUTime + time.Second - 1) / time.Second)
		set = append(set, fmt.Sprintf("ulimit -S -t %d", soft), fmt.Sprintf("ulimit -H -t %d", soft+1))
	}
	if l.MemoryBytes > 0 {
		set = append(set, fmt.Sprintf("ulimit -v %d", l.MemoryBytes>>10))
	}
	if len(set) == 0 {
		return argv
	}
	return append([]string{"/bin/sh", "-c", strings.Join(set, " && ") + ` && exec "$@"`, "sage-limits"}, argv...)
}

// budgetEnd marks res as over its CPU budget when gVisor's kernel ended
// it, or the foreground process its shell waited for, for its RLIMIT_CPU
// (bwrap's budget is read from its cgroup, k.end), and says that the
// budget holds per process.
func (s *Sandbox) budgetEnd(res *sandbox.CommandResult) {
	if _, ok := s.iso.(*gvisorIsolator); !ok || s.limits.CPUTime <= 0 {
		return
	}
	if res.LimitsEnforced != nil {
		le := *res.LimitsEnforced
		le.CPUTime = sandbox.EnforcedPerProcess
		res.LimitsEnforced = &le
	}
	if res.Signal == "SIGXCPU" || res.ExitCode == sigxcpuExit {
		res.CPUTimeExceeded, res.Success = true, false
		res.ExitCode, res.Signal = sigxcpuExit, "SIGXCPU"
	}
}

// gvisorSessionBackground starts a background task in a gVisor session
// sandbox: as under bwrap, but the task is known by its command id (its
// pid inside gVisor is only reported) and signalled through the
// supervisor.
func (s *Sandbox) gvisorSessionBackground(ctx context.Context, inv invocation) (*sandbox.BackgroundTask, error) {
	l, _, err := s.session(ctx, inv.binds)
	if err != nil {
		return nil, err
	}
	if err := l.sameWorkspace(s); err != nil {
		l.idle()
		return nil, err
	}
	req := s.sessionRequest(inv)
	s.commandBudget(&req)
	lim := &bgLimit{done: make(chan struct{})}
	ran := false
	var id uint64
	run := func(ctx context.Context, log *os.File) (int, func() (int, string), error) {
		ran = true
		var pid int
		var wait func() (int, string)
		var err error
		id, pid, wait, err = l.startTaskByID(ctx, req, log)
		if err != nil {
			l.idle()
			return 0, nil, err
		}
		return pid, func() (int, string) {
			defer l.idle()
			code, sig := wait()
			res := &sandbox.CommandResult{ExitCode: code, Signal: sig}
			s.budgetEnd(res)
			lim.exceeded = res.CPUTimeExceeded
			return code, sig
		}, nil
	}
	signal := func(sig syscall.Signal) { l.send(supervisor.Request{Op: "signal", ID: id, Sig: int(sig)}) }
	task, err := s.Background.Start(ctx, sandbox.Launch{Run: run, Signal: signal})
	if err != nil {
		if !ran {
			l.idle()
		}
		return nil, err
	}
	s.bgCPU.Store(task.ID, lim)
	go func() { s.Background.Wait(task.ID); close(lim.done) }()
	return task, nil
}

// startTaskByID starts req with stdin from /dev/null and stdout and
// stderr to log, and returns its command id, its pid inside the sandbox
// and a function that waits for its end.
func (l *liveSession) startTaskByID(ctx context.Context, req supervisor.Request, log *os.File) (uint64, int, func() (int, string), error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, 0, nil, err
	}
	defer null.Close()
	ch := make(chan supervisor.Reply, 2)
	l.mu.Lock()
	l.next++
	req.ID = l.next
	l.waits[req.ID] = ch
	l.mu.Unlock()
	forget := func() { l.mu.Lock(); delete(l.waits, req.ID); l.mu.Unlock() }
	if err := l.send(req, null, log, log); err != nil {
		forget()
		return 0, 0, nil, fmt.Errorf("local: session sandbox: %w", err)
	}
	var r supervisor.Reply
	select {
	case r = <-ch:
	case <-l.dead:
		forget()
		return 0, 0, nil, fmt.Errorf("local: session sandbox ended while the task started: %w", io.ErrUnexpectedEOF)
	case <-ctx.Done():
		l.send(supervisor.Request{Op: "signal", ID: req.ID, Sig: int(syscall.SIGKILL)})
		forget()
		return 0, 0, nil, ctx.Err()
	}
	switch r.Op {
	case "error":
		forget()
		return 0, 0, nil, fmt.Errorf("local: session sandbox: %s", r.Err)
	case "exited": // could not start: the cause is in the log
		forget()
		return 0, 0, nil, fmt.Errorf("local: session sandbox: the background task could not start (exit %d)", r.Exit)
	}
	return req.ID, r.Pid, func() (int, string) {
		defer forget()
		select {
		case r := <-ch:
			return r.Exit, signalName(r.Signal)
		case <-l.dead:
			return 128 + int(syscall.SIGKILL), "SIGKILL"
		}
	}, nil
}
