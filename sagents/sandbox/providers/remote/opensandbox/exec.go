package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
)

// maxStdin bounds ExecOptions.Stdin (it is uploaded as a file first).
const maxStdin = 16 << 20

// stopGrace is how long a command may outlive its timeout before the
// client stops waiting for execd to end it.
const stopGrace = 5 * time.Second

// outcome collects one command's stream.
type outcome struct {
	stdout, stderr *sandbox.BoundedBuffer
	onOut, onErr   func([]byte)
	id             string
	exit           int
	errText        []string
}

func (o *outcome) event(ev Event) error {
	switch ev.Type {
	case EventInit:
		o.id = ev.Text
	case EventStdout:
		o.stdout.Write([]byte(ev.Text))
		if o.onOut != nil {
			o.onOut([]byte(ev.Text))
		}
	case EventStderr:
		o.stderr.Write([]byte(ev.Text))
		if o.onErr != nil {
			o.onErr([]byte(ev.Text))
		}
	case EventFailed:
		if ev.Error == nil {
			o.exit = 1
			break
		}
		if n, err := strconv.Atoi(strings.TrimSpace(ev.Error.Value)); err == nil && (ev.Error.Name == "CommandExecError" || ev.Error.Name == "SystemExit") {
			o.exit = n
			break
		}
		o.exit = 1
		o.errText = append(o.errText, ev.Error.Traceback...)
		if len(ev.Error.Traceback) == 0 {
			o.errText = append(o.errText, ev.Error.Name+": "+ev.Error.Value)
		}
	}
	return nil
}

func newOutcome(limit int, onOut, onErr func([]byte)) *outcome {
	if limit <= 0 {
		limit = sandbox.DefaultOutputLimit
	}
	return &outcome{stdout: sandbox.NewBoundedBuffer(limit / 2), stderr: sandbox.NewBoundedBuffer(limit - limit/2),
		onOut: onOut, onErr: onErr}
}

func (o *outcome) result(d time.Duration) *sandbox.CommandResult {
	for _, l := range o.errText {
		o.stderr.Write([]byte(strings.TrimSuffix(l, "\n") + "\n"))
	}
	r := &sandbox.CommandResult{ExitCode: o.exit, Success: o.exit == 0, Duration: d}
	r.Stdout, r.StdoutDroppedBytes = o.stdout.Text()
	r.Stderr, r.StderrDroppedBytes = o.stderr.Text()
	r.Truncated = r.StdoutDroppedBytes > 0 || r.StderrDroppedBytes > 0
	return r
}

// shell runs a short helper command and returns its stdout (bounded to
// 64 KiB) and exit code.
func (s *Sandbox) shell(ctx context.Context, command string, env map[string]string) (string, int, error) {
	o := newOutcome(128<<10, nil, nil)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := s.execd.RunCommand(ctx, RunCommandRequest{Command: command, Envs: env, TimeoutMS: 30000}, o.event)
	if err != nil {
		return "", 0, s.gone(ctx, err)
	}
	r := o.result(0)
	return r.Stdout, r.ExitCode, nil
}

// ExecuteCommand runs command with /bin/sh -c through execd.
func (s *Sandbox) ExecuteCommand(ctx context.Context, command string, opts sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	req, cleanup, err := s.prepare(ctx, command, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	timeout := sandbox.CommandTimeout(opts.Timeout, s.timeout)
	req.TimeoutMS = timeout.Milliseconds()
	o := newOutcome(opts.OutputLimit, opts.OnStdout, opts.OnStderr)
	runCtx, cancel := context.WithTimeout(ctx, timeout+stopGrace)
	defer cancel()
	start := time.Now()
	err = s.execd.RunCommand(runCtx, req, o.event)
	d := time.Since(start)
	res := o.result(d)
	switch {
	case ctx.Err() != nil:
		s.interrupt(ctx, o.id)
		res.Success = false
		return res, fmt.Errorf("opensandbox: command cancelled: %w", ctx.Err())
	case runCtx.Err() != nil:
		s.interrupt(ctx, o.id)
		res.TimedOut, res.Success = true, false
		return res, nil
	case err != nil:
		return nil, s.gone(ctx, err)
	}
	if d >= timeout && res.ExitCode != 0 {
		res.TimedOut, res.Success = true, false
	}
	return res, nil
}

func (s *Sandbox) interrupt(ctx context.Context, id string) {
	if id == "" {
		return
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = s.execd.Interrupt(c, id)
}

// prepare checks the options and builds the request; cleanup removes
// the uploaded stdin file.
func (s *Sandbox) prepare(ctx context.Context, command string, opts sandbox.ExecOptions) (RunCommandRequest, func(), error) {
	req := RunCommandRequest{Command: command, Envs: map[string]string{}}
	nop := func() {}
	for k, v := range opts.Env {
		if !sandbox.ValidEnvName(k) {
			return req, nop, fmt.Errorf("opensandbox: environment variable name %q is not valid: use letters, digits and _", k)
		}
		req.Envs[k] = v
	}
	req.Cwd = s.ws
	if opts.Workdir != "" {
		dir, err := s.resolve(ctx, "exec", opts.Workdir, false)
		if err != nil {
			return req, nop, err
		}
		info, err := s.execd.Info(ctx, dir)
		if err != nil {
			return req, nop, s.gone(ctx, err)
		}
		if info[dir].Type != "directory" {
			return req, nop, fmt.Errorf("opensandbox: workdir %q is not a directory", opts.Workdir)
		}
		req.Cwd = dir
	}
	if opts.Stdin == nil {
		return req, nop, nil
	}
	data, err := io.ReadAll(io.LimitReader(opts.Stdin, maxStdin+1))
	if err != nil {
		return req, nop, fmt.Errorf("opensandbox: reading stdin: %w", err)
	}
	if len(data) > maxStdin {
		return req, nop, fmt.Errorf("opensandbox: stdin is larger than %d bytes; write it to a file instead", maxStdin)
	}
	f := "/tmp/.sage-stdin-" + sandbox.NewID("in")
	if err := s.execd.Upload(ctx, f, data, 0o600); err != nil {
		return req, nop, s.gone(ctx, err)
	}
	req.Envs["SAGE_STDIN_FILE"] = f
	req.Command = "exec <\"$SAGE_STDIN_FILE\"\n" + command
	return req, func() { _ = s.execd.RemoveFiles(context.WithoutCancel(ctx), f) }, nil
}

// ExecutePython runs code in this Sandbox's Python code context, whose
// state lasts from call to call; a SystemExit sets the exit code, any
// other exception exits 1 with its traceback on stderr. Requirements are
// installed with pip first. Workdir, Env and Stdin do not apply.
func (s *Sandbox) ExecutePython(ctx context.Context, code string, opts sandbox.PythonOptions) (*sandbox.CommandResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(opts.Requirements) > 0 {
		if err := s.pip(ctx, opts); err != nil {
			return nil, err
		}
	}
	s.pyMu.Lock()
	defer s.pyMu.Unlock()
	cc, err := s.pyContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	timeout := sandbox.CommandTimeout(opts.Timeout, s.timeout)
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o := newOutcome(opts.OutputLimit, opts.OnStdout, opts.OnStderr)
	start := time.Now()
	err = s.execd.RunCode(runCtx, cc, code, o.event)
	res := o.result(time.Since(start))
	if runCtx.Err() != nil {
		c, cl := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = s.execd.InterruptCode(c, cc.ID)
		_ = s.execd.DeleteContext(c, cc.ID)
		cl()
		s.mu.Lock()
		s.py = nil
		s.mu.Unlock()
		if ctx.Err() != nil {
			return res, fmt.Errorf("opensandbox: python cancelled: %w", ctx.Err())
		}
		res.TimedOut, res.Success = true, false
		return res, nil
	}
	if err != nil {
		s.mu.Lock()
		s.py = nil // a context that failed is not reused
		s.mu.Unlock()
		return nil, s.gone(ctx, err)
	}
	return res, nil
}

func (s *Sandbox) pyContext(ctx context.Context, opts sandbox.PythonOptions) (CodeContext, error) {
	s.mu.Lock()
	py := s.py
	s.mu.Unlock()
	if py != nil {
		return *py, nil
	}
	done := opts.Step("starting the sandbox's Python interpreter")
	cc, err := s.execd.CreateContext(ctx, "python")
	done()
	if err != nil {
		return cc, s.gone(ctx, err)
	}
	s.mu.Lock()
	s.py = &cc
	s.mu.Unlock()
	return cc, nil
}

// pip installs requirements; each goes to pip as its own argument
// through the environment, never inside the command string.
func (s *Sandbox) pip(ctx context.Context, opts sandbox.PythonOptions) error {
	env := map[string]string{}
	args := make([]string, 0, len(opts.Requirements))
	for i, r := range opts.Requirements {
		if r == "" || strings.HasPrefix(r, "-") {
			return fmt.Errorf("opensandbox: requirement %q: want a pip requirement specifier such as requests>=2", r)
		}
		k := "SAGE_REQ_" + strconv.Itoa(i)
		env[k] = r
		args = append(args, `"$`+k+`"`)
	}
	done := opts.Step("installing Python requirements")
	defer done()
	res, err := s.ExecuteCommand(ctx, "python3 -m pip install -q -- "+strings.Join(args, " "), sandbox.ExecOptions{Env: env, Timeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	if !res.Success {
		return errors.New("opensandbox: pip install failed: " + strings.TrimSpace(res.Stderr))
	}
	return nil
}
