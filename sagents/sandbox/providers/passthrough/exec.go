package passthrough

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// ID is the sandbox id.
func (s *Sandbox) ID() string { return s.id }

// HostWorkspacePath is the workspace on the host.
func (s *Sandbox) HostWorkspacePath() string { return s.hostWS }

// prepare resolves the working directory and the environment.
func (s *Sandbox) prepare(opts driver.ExecOptions) (dir string, env []string, err error) {
	loc, err := s.Workdir(opts)
	if err != nil {
		return "", nil, err
	}
	return loc.Host, hostkit.Environ(nil, s.hostWS, opts.Env), nil
}

func (s *Sandbox) spec(opts driver.ExecOptions, dir string, env []string, argv ...string) hostkit.ProcessSpec {
	return hostkit.ProcessSpec{Path: argv[0], Args: argv, Dir: dir, Env: env, Stdin: opts.Stdin,
		Timeout: driver.CommandTimeout(opts.Timeout, s.timeout), OutputLimit: opts.OutputLimit,
		OnStdout: opts.OnStdout, OnStderr: opts.OnStderr}
}

// Exec runs spec.Command with /bin/sh -c in the workspace (or
// spec.Workdir).
func (s *Sandbox) Exec(ctx context.Context, spec driver.ExecSpec) (*driver.CommandResult, error) {
	dir, env, err := s.prepare(spec.ExecOptions)
	if err != nil {
		return nil, err
	}
	return hostkit.RunProcess(ctx, s.spec(spec.ExecOptions, dir, env, shell, "-c", spec.Command))
}

// ExecutePython runs code with the python3 found on PATH. The code is
// written to a file in the runtime directory and removed afterwards.
// Requirements are not supported: passthrough never installs packages
// into the host's Python.
func (s *Sandbox) ExecutePython(ctx context.Context, code string, opts driver.PythonOptions) (*driver.CommandResult, error) {
	if len(opts.Requirements) > 0 {
		return nil, fmt.Errorf("passthrough: python requirements (would install into the host's Python): %w", driver.ErrUnsupported)
	}
	dir, env, err := s.prepare(opts.ExecOptions)
	if err != nil {
		return nil, err
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, fmt.Errorf("passthrough: python3 not found on PATH: %w", driver.ErrUnsupported)
	}
	codeDir := filepath.Join(s.runtimeDir, "code")
	if err := os.MkdirAll(codeDir, 0o700); err != nil {
		return nil, fmt.Errorf("passthrough: %w", err)
	}
	f, err := os.CreateTemp(codeDir, "exec-*.py")
	if err != nil {
		return nil, fmt.Errorf("passthrough: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(code)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("passthrough: write code file: %w", err)
	}
	return hostkit.RunProcess(ctx, s.spec(opts.ExecOptions, dir, env, py, f.Name()))
}

// StartBackground starts command with /bin/sh -c as a background task.
// opts.Timeout does not apply: the task runs until it ends, is killed, or
// the sandbox is closed. Stdin is /dev/null.
func (s *Sandbox) StartBackground(ctx context.Context, command string, opts driver.ExecOptions) (*driver.BackgroundTask, error) {
	dir, env, err := s.prepare(opts)
	if err != nil {
		return nil, err
	}
	return s.Background.Start(ctx, hostkit.Launch{Path: shell, Args: []string{shell, "-c", command}, Dir: dir, Env: env})
}

// Close kills background tasks; for an anonymous sandbox it also removes
// the runtime directory. *sandbox.Sandbox calls it once.
func (s *Sandbox) Close(ctx context.Context) error {
	err := s.Background.Close(ctx)
	if rerr := s.removeOwnRuntime(); rerr != nil && err == nil {
		err = fmt.Errorf("passthrough: remove runtime dir: %w", rerr)
	}
	return err
}

var (
	_ driver.Driver           = (*Sandbox)(nil)
	_ driver.BackgroundRunner = (*Sandbox)(nil)
	_ driver.HostPather       = (*Sandbox)(nil)
	_ driver.PythonRunner     = (*Sandbox)(nil)
	_ driver.TreeWalker       = (*Sandbox)(nil)
	_ driver.HostCopier       = (*Sandbox)(nil)
)

// Isolation reports none: commands run on the host, with its network
// (driver.IsolationReporter).
func (s *Sandbox) Isolation() (string, driver.NetworkMode) {
	return driver.IsolationNone, driver.NetworkOpen
}
