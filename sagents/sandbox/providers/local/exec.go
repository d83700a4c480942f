package local

import (
	"context"
	"io"
	"os"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

const shell = "/bin/sh"

// prepare checks the options and builds the invocation of argv.
func (s *Sandbox) prepare(opts driver.ExecOptions, argv ...string) (invocation, error) {
	loc, err := s.Workdir(opts)
	if err != nil {
		return invocation{}, err
	}
	return invocation{Argv: argv, Workdir: loc.Host, Chdir: loc.Virtual, Env: opts.Env}, nil
}

func (s *Sandbox) spec(opts driver.ExecOptions, w *wrapped) hostkit.ProcessSpec {
	return hostkit.ProcessSpec{Path: w.Path, Args: w.Args, Dir: w.Dir, Env: w.Env, Stdin: pipeOnly(opts.Stdin),
		Timeout: driver.CommandTimeout(opts.Timeout, s.timeout), OutputLimit: opts.OutputLimit, OnStdout: opts.OnStdout, OnStderr: opts.OnStderr,
		SysProcAttr: w.SysProcAttr(), ExtraFiles: w.ExtraFiles, Terminate: w.Terminate, Start: w.Start, Started: w.Started}
}

// run wraps inv and runs it in the foreground.
func (s *Sandbox) run(ctx context.Context, inv invocation, opts driver.ExecOptions) (*driver.CommandResult, error) {
	w, err := s.iso.Wrap(inv)
	if err != nil {
		return nil, err
	}
	defer w.Done()
	res, err := hostkit.RunProcess(ctx, s.spec(opts, w))
	s.finish(res, w)
	return res, err
}

// Exec runs spec.Command with /bin/sh -c inside the sandbox.
func (s *Sandbox) Exec(ctx context.Context, spec driver.ExecSpec) (*driver.CommandResult, error) {
	opts := spec.ExecOptions
	inv, err := s.prepare(opts, shell, "-c", spec.Command)
	if err != nil {
		return nil, err
	}
	if s.sess.opts.Enabled {
		return s.sessionRun(ctx, inv, opts)
	}
	s.py.addBinds(s, &inv)
	return s.run(ctx, inv, opts)
}

// StartBackground starts command inside the sandbox as a background task:
// in the session sandbox when sessions are on (a server it starts is
// reachable from later commands, ps shows it), else in its own sandbox
// instance (same workspace, mounts and limits). Its log is in the
// session's runtime directory. opts.Timeout does not apply.
func (s *Sandbox) StartBackground(ctx context.Context, command string, opts driver.ExecOptions) (*driver.BackgroundTask, error) {
	inv, err := s.prepare(opts, shell, "-c", command)
	if err != nil {
		return nil, err
	}
	s.py.addBinds(s, &inv)
	if s.sess.opts.Enabled {
		return s.sessionBackground(ctx, inv)
	}
	w, err := s.iso.Wrap(inv)
	if err != nil {
		return nil, err
	}
	task, err := s.Background.Start(ctx, hostkit.Launch{Path: w.Path, Args: w.Args, Dir: w.Dir, Env: w.Env,
		SysProcAttr: w.SysProcAttr(), ExtraFiles: w.ExtraFiles, Terminate: w.Terminate, Start: w.Start, Started: w.Started})
	if err != nil {
		w.Done()
		return nil, err
	}
	s.watchBackground(task.ID, w)
	return task, nil
}

// stdinViaPipe is switched off only by a red-team test's control.
var stdinViaPipe = true

// pipeOnly hides an *os.File behind a plain reader, so os/exec copies it
// through a pipe: the command never holds the caller's file itself (stdin
// redirected from a host file would be writable through /proc/self/fd/0).
func pipeOnly(r io.Reader) io.Reader {
	if f, ok := r.(*os.File); ok && stdinViaPipe {
		return struct{ io.Reader }{f}
	}
	return r
}
