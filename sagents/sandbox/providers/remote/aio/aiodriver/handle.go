package aiodriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// OpenOptions configure Open.
type OpenOptions struct {
	ServerURL string
	// Token is the bearer token. Empty with a loopback ServerURL means
	// the token `sage sandboxd` saved in TokenFile, if there is one.
	Token string
	// SandboxID names the handle; empty means a random id.
	SandboxID string
	// Timeout is the default command timeout; 0 means
	// driver.DefaultTimeout.
	Timeout time.Duration
	// Transport replaces the client's transport (see ClientOptions).
	Transport http.RoundTripper
	// MaxStdin bounds ExecOptions.Stdin, which is staged as a file; 0
	// means 16 MiB.
	MaxStdin int64
	// Env is added to every command's environment (ExecOptions.Env wins).
	// The orchestrating provider passes its configured environment here:
	// sandboxd gives commands only an allowlisted environment, not its
	// own.
	Env map[string]string
}

// Handle is the driver.Driver of a remote sandbox over the AIO API (it
// has no host paths: *sandbox.Sandbox answers ErrUnsupported for them).
type Handle struct {
	c        *aioapi.Client
	id       string
	ws       string // the sandbox's workspace (a virtual path)
	timeout  time.Duration
	maxStdin int64
	env      map[string]string
	lanes    *lanes

	mu    sync.Mutex
	tasks map[string]*bgTask

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

var (
	_ driver.Driver           = (*Handle)(nil)
	_ driver.BackgroundRunner = (*Handle)(nil)
	_ driver.PythonRunner     = (*Handle)(nil)
	_ driver.TreeWalker       = (*Handle)(nil)
	_ driver.HostCopier       = (*Handle)(nil)
)

// Open asks the server for its workspace (GET /v1/sandbox) and returns a
// Handle. The server must answer 200, i.e. be ready.
func Open(ctx context.Context, o OpenOptions) (*Handle, error) {
	if o.Token == "" {
		tok, err := aioapi.LocalToken(o.ServerURL)
		if err != nil {
			return nil, fmt.Errorf("aio: open %s: %w", o.ServerURL, err)
		}
		o.Token = tok
	}
	c, err := aioapi.NewClient(o.ServerURL, aioapi.ClientOptions{Token: o.Token, Transport: o.Transport})
	if err != nil {
		return nil, err
	}
	info, err := c.Sandbox(ctx)
	if err != nil {
		return nil, fmt.Errorf("aio: open %s: %w", o.ServerURL, err)
	}
	ws := info.HomeDir
	if info.Workspace != nil && *info.Workspace != "" {
		ws = *info.Workspace
	}
	if !path.IsAbs(ws) || ws == "/" {
		return nil, fmt.Errorf("aio: open %s: workspace %q is not an absolute path other than /", o.ServerURL, ws)
	}
	h := &Handle{c: c, id: o.SandboxID, ws: path.Clean(ws), timeout: o.Timeout, maxStdin: o.MaxStdin, env: o.Env,
		tasks: map[string]*bgTask{}, closed: make(chan struct{})}
	if h.id == "" {
		h.id = driver.NewID("aio")
	}
	if h.timeout == 0 {
		h.timeout = driver.DefaultTimeout
	}
	if h.maxStdin == 0 {
		h.maxStdin = 16 << 20
	}
	h.lanes = newLanes(c, h.ws)
	return h, nil
}

// ID is the handle's id.
func (h *Handle) ID() string { return h.id }

// WorkspacePath is the sandbox's workspace.
func (h *Handle) WorkspacePath() string { return h.ws }

func (h *Handle) checkOpen() error {
	select {
	case <-h.closed:
		return driver.ErrClosed
	default:
		return nil
	}
}

// resolve maps p to a clean absolute path inside the workspace. Relative
// paths start at the workspace; ".." may not leave it. Symlink escapes
// are the server's to refuse.
func (h *Handle) resolve(op, p string) (string, error) {
	if err := h.checkOpen(); err != nil {
		return "", err
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", driver.NewPathError(op, p, driver.ErrBadPath, "contains a NUL byte")
	}
	v := p
	if !path.IsAbs(v) {
		v = path.Join(h.ws, v)
	}
	v = path.Clean(v)
	if v != h.ws && !strings.HasPrefix(v, h.ws+"/") {
		return "", driver.NewPathError(op, p, driver.ErrEscape, "outside the sandbox's workspace")
	}
	return v, nil
}

// execPlan is a validated command ready to send.
type execPlan struct {
	command string
	dir     string
	env     map[string]string
	timeout time.Duration
	limit   int
	// onOut and onErr receive output as it arrives (ExecOptions.OnStdout
	// and OnStderr); with either, the command is followed live.
	onOut, onErr func([]byte)
}

// liveWait is how long POST /v1/bash/exec waits before answering running
// when output is followed live; /v1/bash/output then long-polls.
const liveWait = 0.05

func (p *execPlan) emit(stdout, stderr string) {
	if p.onOut != nil && stdout != "" {
		p.onOut([]byte(stdout))
	}
	if p.onErr != nil && stderr != "" {
		p.onErr([]byte(stderr))
	}
}

func (h *Handle) plan(ctx context.Context, command string, opts driver.ExecOptions) (*execPlan, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("aio: timeout %v is negative", opts.Timeout)
	}
	for k := range opts.Env {
		if !driver.ValidEnvName(k) {
			return nil, fmt.Errorf("aio: env: invalid variable name %q", k)
		}
	}
	wd := opts.Workdir
	if wd == "" {
		wd = "."
	}
	dir, err := h.resolve("exec", wd)
	if err != nil {
		return nil, err
	}
	p := &execPlan{command: command, dir: dir, env: mergeEnv(h.env, opts.Env), timeout: opts.Timeout, limit: opts.OutputLimit,
		onOut: opts.OnStdout, onErr: opts.OnStderr}
	if p.timeout == 0 {
		p.timeout = h.timeout
	}
	if p.limit <= 0 {
		p.limit = driver.DefaultOutputLimit
	}
	if opts.Stdin != nil {
		if err := h.stageStdin(ctx, p, opts.Stdin); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// stageStdin writes stdin to a file in the workspace; the command opens
// it as its stdin and unlinks it before running (the API has no stdin).
func (h *Handle) stageStdin(ctx context.Context, p *execPlan, r io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(r, h.maxStdin+1))
	if err != nil {
		return fmt.Errorf("aio: read stdin: %w", err)
	}
	if int64(len(data)) > h.maxStdin {
		return fmt.Errorf("aio: stdin is larger than %d bytes", h.maxStdin)
	}
	f := path.Join(h.ws, ".sage-stdin-"+driver.NewID("in"))
	if err := h.writeBytes(ctx, f, data, false); err != nil {
		return fmt.Errorf("aio: stage stdin: %w", err)
	}
	q := shellQuote(f)
	p.command = "exec <" + q + "; rm -f -- " + q + "\n" + p.command
	return nil
}

// Exec runs spec.Command through POST /v1/bash/exec in a session no
// other call uses meanwhile. The output limit is split between stdout and
// stderr (max_output_length each). With OnStdout or OnStderr, the exec
// answers running after liveWait and /v1/bash/output long-polls from the
// offsets, so the callbacks receive output while the command runs.
func (h *Handle) Exec(ctx context.Context, spec driver.ExecSpec) (*driver.CommandResult, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	opts := spec.ExecOptions
	p, err := h.plan(ctx, spec.Command, opts)
	if err != nil {
		return nil, err
	}
	return h.run(ctx, p)
}

func (h *Handle) run(ctx context.Context, p *execPlan) (*driver.CommandResult, error) {
	sid, err := h.lanes.get(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	secs := p.timeout.Seconds()
	maxOut := max(p.limit/2, 1)
	req := aioapi.BashExecRequest{SessionID: sid, Command: p.command, ExecDir: p.dir,
		Env: p.env, HardTimeout: &secs, MaxOutputLength: &maxOut}
	if p.onOut != nil || p.onErr != nil {
		wait := liveWait
		req.Timeout = &wait
	}
	r, err := h.c.BashExec(ctx, req)
	if err == nil {
		p.emit(deref(r.Stdout), deref(r.Stderr))
	}
	if err == nil && (r.Status == aioapi.StatusRunning || r.Status == aioapi.StatusPending) {
		r, err = h.follow(ctx, r, maxOut, p)
		if err != nil && ctx.Err() != nil {
			// Answered running, the command outlives the request: end it.
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = h.c.BashKill(kctx, aioapi.BashKillRequest{SessionID: sid, Signal: "SIGKILL"})
			cancel()
		}
	}
	if err != nil {
		var ae *aioapi.APIError
		if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
			h.lanes.put(sid) // refused before it ran
		} else {
			h.lanes.discard(sid)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("aio: command cancelled: %w", ctx.Err())
		}
		return nil, err
	}
	h.lanes.put(sid)
	return toResult(r, time.Since(start)), nil
}

// follow polls /v1/bash/output until a command that the server reported
// as still running ends, collecting its output: each stream keeps at most
// limit bytes (head and tail, driver.BoundedBuffer), however long the
// command talks.
func (h *Handle) follow(ctx context.Context, r *aioapi.BashExecResult, limit int, p *execPlan) (*aioapi.BashExecResult, error) {
	outBuf, errBuf := driver.NewBoundedBuffer(limit), driver.NewBoundedBuffer(limit)
	_, _ = io.WriteString(outBuf, deref(r.Stdout))
	_, _ = io.WriteString(errBuf, deref(r.Stderr))
	off, eoff := r.Offset, r.StderrOffset
	wait := 10.0
	for {
		o, err := h.c.BashOutput(ctx, aioapi.BashOutputRequest{SessionID: r.SessionID, CommandID: r.CommandID,
			Offset: off, StderrOffset: eoff, Wait: true, WaitTimeout: &wait})
		if err != nil {
			return nil, err
		}
		_, _ = io.WriteString(outBuf, o.Stdout)
		_, _ = io.WriteString(errBuf, o.Stderr)
		p.emit(o.Stdout, o.Stderr)
		off, eoff = o.Offset, o.StderrOffset
		if o.Command != nil && o.Command.Status != aioapi.StatusRunning && o.Command.Status != aioapi.StatusPending {
			r.Status, r.ExitCode = o.Command.Status, o.Command.ExitCode
			stdout, _ := outBuf.Text()
			stderr, _ := errBuf.Text()
			r.Stdout, r.Stderr = &stdout, &stderr
			return r, nil
		}
	}
}

// ExecutePython writes code to a file in the workspace (POST
// /v1/file/write) and runs it with python3; the shell unlinks the file
// before Python starts, Python reads it through /dev/fd/3.
// Requirements are pip-installed first into the sandbox's venv
// (VenvPath), which this and later calls then run in; a failed install
// is a *driver.RequirementsError.
func (h *Handle) ExecutePython(ctx context.Context, code string, opts driver.PythonOptions) (*driver.CommandResult, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	if len(opts.Requirements) > 0 {
		if res, err := h.installRequirements(ctx, opts); err != nil {
			return res, err
		}
	}
	f := path.Join(h.ws, ".sage-py-"+driver.NewID("code")+".py")
	if err := h.writeBytes(ctx, f, []byte(code), false); err != nil {
		return nil, fmt.Errorf("aio: stage python code: %w", err)
	}
	q := shellQuote(f)
	cmd := "exec 3<" + q + " && rm -f -- " + q + " && " + pythonExec
	return h.Exec(ctx, driver.ExecSpec{Command: cmd, ExecOptions: opts.ExecOptions})
}

// shellQuote quotes s for POSIX sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Close kills background tasks and closes every session the handle
// opened. It is idempotent.
func (h *Handle) Close(ctx context.Context) error {
	h.closeOnce.Do(func() {
		close(h.closed)
		h.closeErr = errors.Join(h.closeTasks(ctx), h.lanes.close(ctx))
		h.c.CloseIdle()
	})
	return h.closeErr
}

// mergeEnv returns base overridden by over (base itself when over is
// empty).
func mergeEnv(base, over map[string]string) map[string]string {
	if len(base) == 0 {
		return over
	}
	if len(over) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
