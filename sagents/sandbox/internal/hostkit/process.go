package hostkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// ProcessSpec describes one foreground process for RunProcess.
type ProcessSpec struct {
	Path string   // program to run
	Args []string // argv, Args[0] included
	Dir  string   // host working directory
	Env  []string
	// Stdin feeds the process; nil means /dev/null.
	Stdin io.Reader
	// Timeout is the wall-clock limit; <= 0 means none (ctx still applies).
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL; 0 means
	// DefaultKillGrace.
	KillGrace time.Duration
	// OutputLimit bounds stdout and stderr together; 0 means
	// DefaultOutputLimit.
	OutputLimit int
	// OnStdout and OnStderr receive chunks as they arrive.
	OnStdout, OnStderr func([]byte)
	// SysProcAttr is used as given, except that Setpgid is always set.
	SysProcAttr *syscall.SysProcAttr
	// ExtraFiles are passed to the process as fd 3 and up; RunProcess
	// closes them in the parent once the process started (or failed to).
	ExtraFiles []*os.File
	// Terminate, when set, replaces the SIGTERM sent to the process group
	// on timeout or cancellation (a provider whose commands run in their
	// own session inside a sandbox signals them there). SIGKILL always
	// goes to the process group.
	Terminate func()
	// Start, when set, starts the command instead of its Start method (a
	// driver that forks from a thread of its own: local mode's thread in
	// the sandbox's cgroups); it calls cmd.Start once.
	Start func(cmd *exec.Cmd) error
	// Started, when set, runs right after the process started; an error
	// kills the process group and fails the call.
	Started func(pid int) error
}

// drainDeadline bounds how long output is read after the process group
// was killed: a process that left the group (setsid) and still holds a pipe
// cannot hang the call.
const drainDeadline = 2 * time.Second

var errTimeout = errors.New("sandbox: command timed out")

// RunProcess runs the process in its own process group and waits for it.
// On timeout or ctx cancellation the whole group gets SIGTERM, then SIGKILL
// after KillGrace. When the leader exits, whatever is left of its group is
// killed: foreground commands do not leave processes behind (use background
// tasks for that). The result carries the (partial) output in every case.
// A cancelled ctx returns the partial result together with an error
// wrapping ctx's error; a timeout is a result with TimedOut set.
func RunProcess(ctx context.Context, spec ProcessSpec) (*driver.CommandResult, error) {
	grace := spec.KillGrace
	if grace <= 0 {
		grace = driver.DefaultKillGrace
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if spec.Timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(ctx, spec.Timeout, errTimeout)
	}
	defer cancel()

	p, err := startProcess(spec)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	waitErr, killedEarly := p.wait(runCtx, grace, spec.Terminate)
	p.finish()
	res := p.result(time.Since(start))
	if killedEarly {
		if context.Cause(runCtx) == errTimeout && ctx.Err() == nil {
			res.TimedOut, res.Success = true, false
		} else {
			return res, fmt.Errorf("sandbox: command cancelled: %w", ctx.Err())
		}
	}
	if waitErr != nil && !isExitError(waitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("sandbox: wait: %w", waitErr)
	}
	return res, nil
}

type process struct {
	cmd  *exec.Cmd
	pgid int
	out  *Output
}

func startProcess(spec ProcessSpec) (*process, error) {
	out, outW, errW, err := NewOutput(spec.OutputLimit)
	if err != nil {
		closeFiles(spec.ExtraFiles)
		return nil, err
	}
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Dir: spec.Dir, Env: spec.Env,
		Stdin: spec.Stdin, Stdout: outW, Stderr: errW, WaitDelay: drainDeadline, ExtraFiles: spec.ExtraFiles}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if spec.SysProcAttr != nil {
		*cmd.SysProcAttr = *spec.SysProcAttr
	}
	cmd.SysProcAttr.Setpgid = true
	if spec.Start != nil {
		err = spec.Start(cmd)
	} else {
		err = cmd.Start()
	}
	outW.Close()
	errW.Close()
	closeFiles(spec.ExtraFiles)
	if err == nil && spec.Started != nil {
		if err = spec.Started(cmd.Process.Pid); err != nil {
			killGroup(cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	}
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("sandbox: start %s: %w", spec.Path, err)
	}
	out.Start(spec.OnStdout, spec.OnStderr)
	return &process{cmd: cmd, pgid: cmd.Process.Pid, out: out}, nil
}

// wait waits for the leader; on ctx done it terminates the group. It
// reports whether the process was killed because ctx ended.
func (p *process) wait(ctx context.Context, grace time.Duration, terminate func()) (error, bool) {
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		return err, false
	case <-ctx.Done():
	}
	if terminate != nil {
		terminate()
	} else {
		killGroup(p.pgid, syscall.SIGTERM)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-exited:
		return err, true
	case <-t.C:
	}
	killGroup(p.pgid, syscall.SIGKILL)
	return <-exited, true
}

// finish kills what is left of the group and collects the output, giving
// up on pipes still held open after drainDeadline.
func (p *process) finish() {
	killGroup(p.pgid, syscall.SIGKILL)
	p.out.Wait(drainDeadline)
	p.out.Close()
}

func (p *process) result(d time.Duration) *driver.CommandResult {
	res := &driver.CommandResult{Duration: d}
	p.out.Fill(res)
	res.ExitCode, res.Signal = exitStatus(p.cmd.ProcessState)
	res.Success = res.ExitCode == 0
	return res
}

// exitStatus returns the exit code, or 128+n and the signal's name when a
// signal ended the process (the shell's convention).
func exitStatus(ps *os.ProcessState) (int, string) {
	if ps == nil {
		return -1, ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

func isExitError(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

// killGroup signals a process group; a group that is already gone is fine.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}
