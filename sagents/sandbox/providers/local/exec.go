package local

import (
	"context"
	"fmt"
	"os"

	"github.com/sage-go/sage/sagents/sandbox"
)

const shell = "/bin/sh"

// prepare checks the options and builds the invocation of argv.
func (s *Sandbox) prepare(opts sandbox.ExecOptions, argv ...string) (invocation, error) {
	if err := s.checkOpen(); err != nil {
		return invocation{}, err
	}
	if opts.Timeout < 0 {
		return invocation{}, fmt.Errorf("local: timeout %v is negative", opts.Timeout)
	}
	for k := range opts.Env {
		if !sandbox.ValidEnvName(k) {
			return invocation{}, fmt.Errorf("local: env: invalid variable name %q", k)
		}
	}
	wd := opts.Workdir
	if wd == "" {
		wd = "."
	}
	loc, err := s.Mapper.Resolve(wd)
	if err != nil {
		return invocation{}, err
	}
	if fi, err := os.Stat(loc.Host); err != nil {
		return invocation{}, fmt.Errorf("local: workdir %q: %w", wd, err)
	} else if !fi.IsDir() {
		return invocation{}, fmt.Errorf("local: workdir %q is not a directory", wd)
	}
	return invocation{argv: argv, workdir: loc.Host, chdir: loc.Virtual, env: opts.Env}, nil
}

func (s *Sandbox) spec(opts sandbox.ExecOptions, w *wrapped) sandbox.ProcessSpec {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = s.timeout
	}
	if timeout == 0 {
		timeout = sandbox.DefaultTimeout
	}
	return sandbox.ProcessSpec{Path: w.path, Args: w.args, Dir: w.dir, Env: w.env, Stdin: opts.Stdin,
		Timeout: timeout, OutputLimit: opts.OutputLimit, OnStdout: opts.OnStdout, OnStderr: opts.OnStderr,
		SysProcAttr: sysProcAttr(), ExtraFiles: w.extraFiles, Terminate: w.terminate, Started: w.started}
}

// run wraps inv and runs it in the foreground.
func (s *Sandbox) run(ctx context.Context, inv invocation, opts sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	w, err := s.iso.wrap(inv)
	if err != nil {
		return nil, err
	}
	defer w.done()
	return sandbox.RunProcess(ctx, s.spec(opts, w))
}

// ExecuteCommand runs command with /bin/sh -c inside the sandbox.
func (s *Sandbox) ExecuteCommand(ctx context.Context, command string, opts sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	inv, err := s.prepare(opts, shell, "-c", command)
	if err != nil {
		return nil, err
	}
	s.py.addBinds(s, &inv)
	return s.run(ctx, inv, opts)
}

// StartBackground starts command inside the sandbox as a background task,
// in its own sandbox instance (same workspace, mounts and limits). Its log
// is in the session's runtime directory. opts.Timeout does not apply.
func (s *Sandbox) StartBackground(ctx context.Context, command string, opts sandbox.ExecOptions) (*sandbox.BackgroundTask, error) {
	inv, err := s.prepare(opts, shell, "-c", command)
	if err != nil {
		return nil, err
	}
	s.py.addBinds(s, &inv)
	w, err := s.iso.wrap(inv)
	if err != nil {
		return nil, err
	}
	task, err := s.bg.Start(ctx, sandbox.Launch{Path: w.path, Args: w.args, Dir: w.dir, Env: w.env,
		SysProcAttr: sysProcAttr(), ExtraFiles: w.extraFiles, Terminate: w.terminate, Started: w.started})
	if err != nil {
		w.done()
		return nil, err
	}
	go func() {
		s.bg.Wait(task.ID)
		w.done()
	}()
	return task, nil
}

// ReadBackgroundOutput reads a task's log from offset.
func (s *Sandbox) ReadBackgroundOutput(_ context.Context, taskID string, offset int64, max int) (sandbox.BackgroundOutput, error) {
	return s.bg.Read(taskID, offset, max)
}

// BackgroundStatus reports a task's state.
func (s *Sandbox) BackgroundStatus(_ context.Context, taskID string) (sandbox.BackgroundState, error) {
	return s.bg.Status(taskID)
}

// KillBackground ends a task: SIGTERM to its processes inside the
// sandbox, then SIGKILL to the sandbox itself (at once with force).
func (s *Sandbox) KillBackground(ctx context.Context, taskID string, force bool) error {
	return s.bg.Kill(ctx, taskID, force)
}
