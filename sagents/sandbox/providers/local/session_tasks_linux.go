//go:build linux

package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// sessionBinds adds what every session sandbox shows besides the
// workspace and the mounts: the session's venv directory (read-write, at
// VenvPath, created empty when there is no venv yet, so a venv made later
// by ExecutePython is seen by the running session), the code directory of
// ExecutePython and ExecuteJavaScript (read-only, at CodePath), and the
// binds that calls needed so far (interpreter prefixes, a local pip
// find-links directory).
func (s *Sandbox) sessionBinds(inv *invocation) error {
	s.py.addBinds(s, inv) // the venv's base interpreter prefix, when the venv exists
	venv, code := s.py.venvHost(), filepath.Join(s.runtimeDir, "code")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		return fmt.Errorf("local: venv: %w", err)
	}
	if id := s.ident; id != nil { // the session's uid makes the venv inside
		if err := os.Lchown(venv, id.UID, id.GID); err != nil {
			return fmt.Errorf("local: venv: %w", err)
		}
	}
	if err := os.MkdirAll(code, 0o755); err != nil {
		return fmt.Errorf("local: code dir: %w", err)
	}
	inv.Binds = appendMissing(inv.Binds, bind{Host: venv, Inside: VenvPath}, bind{Host: code, Inside: CodePath, ReadOnly: true})
	inv.Binds = appendMissing(inv.Binds, s.sess.extra...)
	return nil
}

// appendMissing appends the binds of add that binds does not hold yet.
func appendMissing(binds []bind, add ...bind) []bind {
	for _, b := range add {
		if !slices.Contains(binds, b) {
			binds = append(binds, b)
		}
	}
	return binds
}

// missingBinds are the binds of need that have is without.
func missingBinds(have, need []bind) []bind {
	var out []bind
	for _, b := range need {
		if !slices.Contains(have, b) {
			out = append(out, b)
		}
	}
	return out
}

// sessionVenv is where the venv is inside the session sandbox, "" while
// there is none.
func (s *Sandbox) sessionVenv() string {
	if fileExists(filepath.Join(s.py.venvHost(), "pyvenv.cfg")) {
		return VenvPath
	}
	return ""
}

// runInv runs an invocation in the foreground: in the session sandbox
// when sessions are on, else in a sandbox of its own.
func (s *Sandbox) runInv(ctx context.Context, inv invocation, opts driver.ExecOptions) (*driver.CommandResult, error) {
	if s.sess.opts.Enabled {
		return s.sessionRun(ctx, inv, opts)
	}
	return s.run(ctx, inv, opts)
}

// sessionRequest is the supervisor's exec request for inv: its argv,
// working directory and environment (the venv on PATH once it exists,
// the egress proxy's variables).
func (s *Sandbox) sessionRequest(inv invocation) supervisor.Request {
	venv := inv.Venv
	if venv == "" {
		venv = s.sessionVenv()
	}
	var env []string
	for k, v := range isolation.Env(s.iso.VirtualWorkspace(), s.egress.withProxyEnv(inv.Env), venv) {
		env = append(env, k+"="+v)
	}
	// The umask is the supervisor's own, inherited by every command.
	return supervisor.Request{Op: "exec", Argv: inv.Argv, Env: env, Dir: inv.Chdir}
}

// sessionBackground starts a background task inside the session
// sandbox: it shares the session's /tmp, processes and localhost, its
// output goes to the task's log, and the session is not stopped for
// idleness while it runs. Under bwrap the task is known by its host pid
// (from the pidfd the supervisor sends) and its CPU budget is a cgroup;
// under gVisor it is known by its command id (its pid inside gVisor is
// only reported), signalled through the supervisor, and its budget is
// its RLIMIT_CPU (session_gvisor_linux.go).
func (s *Sandbox) sessionBackground(ctx context.Context, inv invocation) (*driver.BackgroundTask, error) {
	l, _, req, k, err := s.sessionCommand(ctx, inv)
	if err != nil {
		return nil, err
	}
	_, byID := s.iso.(*isolation.Gvisor)
	lim := &bgLimit{done: make(chan struct{})}
	ran := false
	var id uint64
	var hostPID int
	ended := make(chan struct{}) // the task's "exited" came
	run := func(ctx context.Context, log *os.File) (int, func() (int, string), error) {
		ran = true
		var pid int
		var wait func() (int, string)
		var err error
		id, pid, wait, err = l.startTask(ctx, req, log, k, !byID)
		if !byID {
			hostPID = pid
		}
		if err != nil {
			k.Release()
			l.idle()
			return 0, nil, err
		}
		l.taskCount(1)
		return pid, func() (int, string) {
			defer l.idle()
			defer l.taskCount(-1)
			code, sig := wait()
			close(ended)
			res := &driver.CommandResult{ExitCode: code, Signal: sig}
			k.End(res)
			k.Release()
			s.budgetEnd(res)
			lim.exceeded = res.CPUTimeExceeded
			return code, sig
		}, nil
	}
	// KillBackground signals the task through the supervisor, by its
	// command id: SIGTERM and SIGKILL reach every process of its Landlock
	// domain or group tag, wherever it moved. Under bwrap, a SIGKILL the
	// task has not died of within sessionUnresponsiveGrace is sent to its
	// process group by its host pid from here as well, which needs nothing
	// inside to behave (not at once: the supervisor must see the task told
	// to end before its leader dies, or it would keep the rest).
	launch := hostkit.Launch{Run: run, Signal: func(sig syscall.Signal) {
		l.send(supervisor.Request{Op: "signal", ID: id, Sig: int(sig)})
		if !byID && hostPID > 0 && sig == syscall.SIGKILL {
			time.AfterFunc(sessionUnresponsiveGrace, func() {
				select {
				case <-ended:
				default:
					syscall.Kill(-hostPID, syscall.SIGKILL)
				}
			})
		}
	}}
	task, err := s.Background.Start(ctx, launch)
	if err != nil {
		if !ran {
			k.Release()
			l.idle()
		}
		return nil, err
	}
	s.bgCPU.Store(task.ID, lim)
	go func() { s.Background.Wait(task.ID); close(lim.done) }()
	return task, nil
}

// startTask starts req with stdin from /dev/null and stdout and stderr
// to log, and returns its command id, its pid and a function that waits
// for its end. With hostPid the pid is the host pid of its process-group
// leader (from the pidfd the supervisor sends), and k, if any, is the
// cgroup it is put in before its first instruction; without (gVisor) it
// is its pid inside the sandbox, only reported.
func (l *liveSession) startTask(ctx context.Context, req supervisor.Request, log *os.File, k *limits.CommandCgroup, hostPid bool) (uint64, int, func() (int, string), error) {
	req.Gate, req.Pidfd = k != nil, hostPid
	if k != nil {
		req.CPUSeconds = int((k.Budget()+time.Second-1)/time.Second) + 1
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, 0, nil, err
	}
	defer null.Close()
	ch, forget := l.register(&req)
	fail := func(err error) (uint64, int, func() (int, string), error) {
		l.send(supervisor.Request{Op: "signal", ID: req.ID, Sig: int(syscall.SIGKILL)})
		forget()
		return 0, 0, nil, err
	}
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
		return fail(ctx.Err())
	}
	pid := r.Pid
	switch {
	case r.Op == "error":
		forget()
		return 0, 0, nil, fmt.Errorf("local: session sandbox: %s", r.Err)
	case r.Op == "exited": // could not start: the cause is in the log
		forget()
		return 0, 0, nil, fmt.Errorf("local: session sandbox: the background task could not start (exit %d)", r.Exit)
	case !hostPid:
	case r.HostPid <= 0 && k == nil:
		// Its pidfd names no process: it ended (and was reaped) before
		// the host read it. Its "exited" follows.
		select {
		case r := <-ch:
			forget()
			return req.ID, 0, func() (int, string) { return r.Exit, signalName(r.Signal) }, nil
		case <-time.After(time.Second):
		}
		fallthrough
	case r.HostPid <= 0:
		return fail(fmt.Errorf("local: session sandbox: no host pid for the background task: %s", r.Err))
	default:
		pid = r.HostPid
	}
	if k != nil {
		if err := k.Start(pid); err != nil {
			return fail(err)
		}
		l.send(supervisor.Request{Op: "release", ID: req.ID})
	}
	return req.ID, pid, func() (int, string) {
		defer forget()
		select {
		case r := <-ch:
			return r.Exit, signalName(r.Signal)
		case <-l.dead:
			return 128 + int(syscall.SIGKILL), "SIGKILL"
		}
	}, nil
}

func signalName(n int) string {
	if n <= 0 {
		return ""
	}
	return hostkit.SignalName(syscall.Signal(n))
}
