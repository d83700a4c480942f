package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// maxStdin bounds ExecOptions.Stdin (it is uploaded as a file first).
const maxStdin = 16 << 20

// stopGrace is how long a command may outlive its timeout before the
// client stops waiting for execd to end it.
const stopGrace = 5 * time.Second

// outcome collects one command's stream.
type outcome struct {
	stdout, stderr *lineStream
	command        bool // a /command stream: stop at its last event
	id             string
	exit           int
	signal         string
}

// ansi matches the terminal colour codes of IPython's tracebacks.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func (o *outcome) event(ev event) error {
	switch ev.Type {
	case eventInit:
		o.id = ev.Text
	case eventStdout, eventStderr:
		st := o.stdout
		if ev.Type == eventStderr {
			st = o.stderr
		}
		if ev.Oversize > 0 {
			st.lost(ev.Oversize)
		} else {
			st.event(ev.Text)
		}
	case eventResult:
		// An expression's value (the last line of a cell), as text.
		if t, ok := ev.Results["text"].(string); ok {
			o.stdout.event(t + "\n")
		}
	case eventFailed:
		o.failed(ev.Error)
		if o.command {
			return errFinal
		}
	case eventComplete:
		if o.command {
			return errFinal
		}
	}
	return nil
}

// failed reads an "error" event: a command's exit code (-1 and Go's
// "signal: killed" for a signal), a SystemExit's code, or an exception,
// whose traceback goes to stderr at once.
func (o *outcome) failed(e *eventError) {
	o.exit = 1
	if e == nil {
		return
	}
	val := strings.TrimSpace(e.Value)
	switch e.Name {
	case "CommandExecError":
		n, err := strconv.Atoi(val)
		switch {
		case err == nil && n >= 0:
			o.exit = n
			return
		case err == nil && len(e.Traceback) > 0:
			if code, sig, ok := signalExit(e.Traceback[0]); ok {
				o.exit, o.signal = code, sig
				return
			}
		}
	case "SystemExit":
		if val == "" || val == "None" {
			o.exit = 0
			return
		}
		if n, err := strconv.Atoi(val); err == nil {
			o.exit = n
			return
		}
		o.stderr.event(val + "\n")
		return
	}
	lines := e.Traceback
	if len(lines) == 0 {
		lines = []string{e.Name + ": " + e.Value}
	}
	for _, l := range lines {
		o.stderr.event(ansi.ReplaceAllString(strings.TrimSuffix(l, "\n"), "") + "\n")
	}
}

// newOutcome splits limit between the two streams; command says the
// events are execd's line events of a /command stream.
func newOutcome(limit int, command bool, onOut, onErr func([]byte)) *outcome {
	if limit <= 0 {
		limit = driver.DefaultOutputLimit
	}
	o := &outcome{stdout: newLineStream(limit/2, onOut), stderr: newLineStream(limit-limit/2, onErr), command: command}
	o.stdout.raw, o.stderr.raw = !command, !command
	return o
}

func (o *outcome) result(d time.Duration) *driver.CommandResult {
	r := &driver.CommandResult{ExitCode: o.exit, Success: o.exit == 0, Duration: d, Signal: o.signal}
	r.Stdout, r.StdoutDroppedBytes = o.stdout.out.Text()
	r.Stderr, r.StderrDroppedBytes = o.stderr.out.Text()
	r.Truncated = r.StdoutDroppedBytes > 0 || r.StderrDroppedBytes > 0
	return r
}

// runCommand runs req to its last event and then gives each stream the
// exact bytes the command wrote, read from execd's output files (see
// lines.go), which it schedules for removal.
func (s *osSandbox) runCommand(ctx context.Context, req runCommandRequest, o *outcome) error {
	err := s.execd.runCommand(ctx, req, o.event)
	if err != nil || o.id == "" {
		return err
	}
	for _, st := range []struct {
		l   *lineStream
		ext string
	}{{o.stdout, ".stdout"}, {o.stderr, ".stderr"}} {
		file := path.Join(s.cfg.ExecdTmp, o.id+st.ext)
		var exact []byte
		switch {
		case st.l.events == 0:
		case !st.l.over:
			exact, _ = s.execd.download(ctx, file, int64(2*st.l.kept.Len()+64))
		case st.l.finishLarge(func(rng string, max int64) ([]byte, int64, error) {
			return s.execd.downloadRange(ctx, file, rng, max)
		}):
			s.dropLater(file)
			continue
		}
		st.l.finish(exact)
		s.dropLater(file)
	}
	return nil
}

// dropLater queues an execd output file for removal; they go in
// batches (and at Close), so a command costs no extra round trip.
func (s *osSandbox) dropLater(file string) {
	s.mu.Lock()
	s.stale = append(s.stale, file)
	var batch []string
	if len(s.stale) >= staleBatch {
		batch, s.stale = s.stale, nil
	}
	s.mu.Unlock()
	if batch != nil {
		s.dropNow(batch)
	}
}

// staleBatch is how many execd output files are removed at once.
const staleBatch = 64

func (s *osSandbox) dropNow(files []string) {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.execd.removeFiles(c, files...)
}

// shell runs a short helper command and returns its stdout (bounded to
// 64 KiB) and exit code.
func (s *osSandbox) shell(ctx context.Context, command string, env map[string]string) (string, int, error) {
	o := newOutcome(128<<10, true, nil, nil)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := s.runCommand(ctx, runCommandRequest{Command: command, Envs: env, TimeoutMS: 30000}, o)
	if err != nil {
		return "", 0, s.gone(ctx, err)
	}
	r := o.result(0)
	return r.Stdout, r.ExitCode, nil
}

// executeCommand runs command through execd, which runs it with bash -c
// (sh -c where the sandbox has no bash).
func (s *osSandbox) executeCommand(ctx context.Context, command string, opts driver.ExecOptions) (*driver.CommandResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	req, cleanup, err := s.prepare(ctx, command, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	timeout := driver.CommandTimeout(opts.Timeout, s.timeout)
	req.TimeoutMS = timeout.Milliseconds()
	o := newOutcome(opts.OutputLimit, true, opts.OnStdout, opts.OnStderr)
	runCtx, cancel := context.WithTimeout(ctx, timeout+stopGrace)
	defer cancel()
	start := time.Now()
	err = s.runCommand(runCtx, req, o)
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

func (s *osSandbox) interrupt(ctx context.Context, id string) {
	if id == "" {
		return
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = s.execd.interrupt(c, id)
}

// prepare checks the options and builds the request; cleanup removes
// the uploaded stdin file.
func (s *osSandbox) prepare(ctx context.Context, command string, opts driver.ExecOptions) (runCommandRequest, func(), error) {
	req := runCommandRequest{Command: command, Envs: map[string]string{}}
	nop := func() {}
	for k, v := range opts.Env {
		if !driver.ValidEnvName(k) {
			return req, nop, fmt.Errorf("opensandbox: environment variable name %q is not valid: use letters, digits and _", k)
		}
		req.Envs[k] = v
	}
	req.Cwd = s.ws
	if opts.Workdir != "" {
		t, err := s.resolve(ctx, "exec", opts.Workdir, false)
		if err != nil {
			return req, nop, err
		}
		if t.info == nil {
			return req, nop, &fs.PathError{Op: "exec", Path: opts.Workdir, Err: fs.ErrNotExist}
		}
		if t.info.Type != "directory" {
			return req, nop, fmt.Errorf("opensandbox: workdir %q is not a directory", opts.Workdir)
		}
		req.Cwd = t.real
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
	f := "/tmp/.sage-stdin-" + driver.NewID("in")
	if err := s.execd.upload(ctx, f, data, 0o600); err != nil {
		return req, nop, s.gone(ctx, err)
	}
	req.Envs["SAGE_STDIN_FILE"] = f
	req.Command = "exec <\"$SAGE_STDIN_FILE\"\n" + command
	return req, func() { _ = s.execd.removeFiles(context.WithoutCancel(ctx), f) }, nil
}

// ExecutePython runs code in this Sandbox's Python code context, whose
// state lasts from call to call; a SystemExit sets the exit code, any
// other exception exits 1 with its traceback on stderr. Requirements are
// installed with pip first. Workdir, Env and Stdin do not apply.
func (s *osSandbox) ExecutePython(ctx context.Context, code string, opts driver.PythonOptions) (*driver.CommandResult, error) {
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
	timeout := driver.CommandTimeout(opts.Timeout, s.timeout)
	cc, err := s.pyContext(ctx, timeout, opts)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o := newOutcome(opts.OutputLimit, false, opts.OnStdout, opts.OnStderr)
	start := time.Now()
	err = s.execd.runCode(runCtx, cc, code, o.event)
	res := o.result(time.Since(start))
	if runCtx.Err() != nil {
		c, cl := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = s.execd.interruptCode(c, cc.ID)
		_ = s.execd.deleteContext(c, cc.ID)
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

// pyContext returns this Sandbox's code context, creating it first
// within timeout: execd waits for its Jupyter server for minutes, and
// for ever where the sandbox has none.
func (s *osSandbox) pyContext(ctx context.Context, timeout time.Duration, opts driver.PythonOptions) (codeContext, error) {
	s.mu.Lock()
	py := s.py
	s.mu.Unlock()
	if py != nil {
		return *py, nil
	}
	done := opts.Step("starting the sandbox's Python interpreter")
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cc, err := s.execd.createContext(cctx, "python")
	cancel()
	done()
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return cc, fmt.Errorf("opensandbox: starting a Python code context took over %v (does the sandbox run a Jupyter server with a kernelspec named python?): %w", timeout, err)
	}
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
func (s *osSandbox) pip(ctx context.Context, opts driver.PythonOptions) error {
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
	res, err := s.executeCommand(ctx, "python3 -m pip install -q -- "+strings.Join(args, " "), driver.ExecOptions{Env: env, Timeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	if !res.Success {
		return errors.New("opensandbox: pip install failed: " + strings.TrimSpace(res.Stderr))
	}
	return nil
}
