package aioserver

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// Output caps: the spec's default max_output_length, and the cap used when
// a client disables truncation (0).
const (
	defaultMaxOutput = 50000
	uncappedOutput   = 32 << 20
	outputChunk      = 1 << 20
)

func (s *Server) execOptions(dir string, env map[string]string, hard *float64, maxOut *int) (sandbox.ExecOptions, error) {
	for k := range env {
		if !sandbox.ValidEnvName(k) {
			return sandbox.ExecOptions{}, badArg("env: invalid variable name " + k)
		}
	}
	o := sandbox.ExecOptions{Workdir: dir, Env: env, Timeout: s.opts.DefaultTimeout}
	if hard != nil {
		if *hard <= 0 || math.IsNaN(*hard) || *hard > 7*24*3600 {
			return o, badArg("hard_timeout must be a positive number of seconds (at most a week)")
		}
		o.Timeout = time.Duration(*hard * float64(time.Second))
	}
	per := defaultMaxOutput
	if maxOut != nil {
		per = *maxOut
	}
	switch {
	case per < 0:
		return o, badArg("max_output_length must not be negative")
	case per == 0 || per > uncappedOutput:
		per = uncappedOutput
	}
	o.OutputLimit = 2 * per // each stream gets max_output_length
	return o, nil
}

// exitCode reports a signal as -n (Python's convention).
func exitCode(res *sandbox.CommandResult) int {
	if res.Signal != "" && res.ExitCode > 128 {
		return -(res.ExitCode - 128)
	}
	return res.ExitCode
}

// waitOf turns a request's timeout (seconds the HTTP call waits) into a
// duration; nil waits until the command ends (-1).
func waitOf(timeout *float64) (time.Duration, error) {
	if timeout == nil {
		return -1, nil
	}
	if *timeout < 0 || math.IsNaN(*timeout) || *timeout > 7*24*3600 {
		return 0, badArg("timeout must be a non-negative number of seconds (at most a week)")
	}
	return time.Duration(*timeout * float64(time.Second)), nil
}

// plainShell runs each command afresh: /v1/bash/exec commands do not
// share state (the remote Handle runs unrelated commands in a pool of
// sessions and relies on it); /v1/shell/exec sessions do.
type plainShell struct{ h *sandbox.Sandbox }

func (p plainShell) Exec(ctx context.Context, command string, opts sandbox.ExecOptions, _ bool) (*sandbox.CommandResult, error) {
	return p.h.ExecuteCommand(ctx, command, opts)
}
func (p plainShell) Dir() string                 { return "" }
func (p plainShell) Close(context.Context) error { return nil }

// startCommand runs command in session sess and records it. When the
// HTTP call waits until the end (wait < 0), the command is cancelled if
// the client goes away; with a timeout it outlives the request.
func (s *Server) startCommand(r *http.Request, sess *session, sh Shell, text string, opts sandbox.ExecOptions, merge, stdin bool, wait time.Duration, perStream int) (*command, error) {
	parent := s.base
	if wait < 0 {
		ctx, cancel := context.WithCancel(s.base)
		// The request's end cancels the command; by then it has ended
		// unless the client went away.
		context.AfterFunc(r.Context(), cancel)
		parent = ctx
	}
	rn, err := startRun(parent, sh, text, opts, merge, stdin, perStream)
	if err != nil {
		return nil, err
	}
	c := &command{id: sandbox.NewID("cmd"), command: text, run: rn}
	s.sessions.add(sess.id, c)
	return c, nil
}

func (s *Server) bashExec(w http.ResponseWriter, r *http.Request) {
	var req aio.BashExecRequest
	if !s.decode(w, r, &req, "command") {
		return
	}
	opts, err := s.execOptions(req.ExecDir, req.Env, req.HardTimeout, req.MaxOutputLength)
	if err != nil {
		s.fail(w, err)
		return
	}
	wait, err := waitOf(req.Timeout)
	if err != nil {
		s.fail(w, err)
		return
	}
	sess, err := s.sessions.use(r.Context(), req.SessionID)
	if err != nil {
		s.fail(w, err)
		return
	}
	if req.AsyncMode {
		s.bashStart(w, r.Context(), sess, req, opts)
		return
	}
	c, err := s.startCommand(r, sess, plainShell{s.h}, req.Command, opts, false, false, wait, opts.OutputLimit/2)
	if err != nil {
		s.fail(w, err)
		return
	}
	ended := c.run.waitFor(r.Context(), wait)
	snap := c.run.snapshot()
	if ended && snap.err != nil {
		s.fail(w, snap.err)
		return
	}
	out := aio.BashExecResult{SessionID: sess.id, CommandID: c.id, Command: req.Command, Status: aio.StatusRunning,
		Stdout: &snap.stdout, Stderr: &snap.stderr, Offset: int64(len(snap.stdout)), StderrOffset: int64(len(snap.stderr))}
	if snap.res != nil {
		out.Status = aio.StatusCompleted
		if snap.res.TimedOut {
			out.Status = aio.StatusTimedOut
		}
		code := exitCode(snap.res)
		out.ExitCode = &code
	}
	ok(w, out)
}

// bashStart runs an async command as a background task of the Handle; its
// stdout and stderr share the task's log, reported as stdout.
func (s *Server) bashStart(w http.ResponseWriter, ctx context.Context, sess *session, req aio.BashExecRequest, opts sandbox.ExecOptions) {
	opts.Timeout = 0
	task, err := s.h.StartBackground(ctx, req.Command, opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	c := &command{id: sandbox.NewID("cmd"), command: req.Command, taskID: task.ID}
	s.sessions.add(sess.id, c)
	empty := ""
	ok(w, aio.BashExecResult{SessionID: sess.id, CommandID: c.id, Command: req.Command, Status: aio.StatusRunning,
		Stdout: &empty, Stderr: &empty})
}

func (s *Server) bashOutput(w http.ResponseWriter, r *http.Request) {
	var req aio.BashOutputRequest
	if !s.decode(w, r, &req, "session_id") {
		return
	}
	if req.Offset < 0 || req.StderrOffset < 0 {
		s.fail(w, badArg("offsets must not be negative"))
		return
	}
	c, known, found := s.sessions.command(req.SessionID, req.CommandID)
	if !known {
		envelopeError(w, http.StatusNotFound, "no such session: "+req.SessionID, nil, "")
		return
	}
	out := aio.BashOutputResult{SessionID: req.SessionID, Offset: req.Offset, StderrOffset: req.StderrOffset}
	if !found {
		if req.CommandID != "" {
			envelopeError(w, http.StatusNotFound, "no such command: "+req.CommandID, nil, "")
			return
		}
		ok(w, out)
		return
	}
	var err error
	if c.run != nil {
		err = s.runOutput(r.Context(), &out, c, req)
	} else {
		err = s.fillOutput(r.Context(), &out, c, req)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	ok(w, out)
}

// outputWait is how long /v1/bash/output waits when asked to.
func outputWait(req aio.BashOutputRequest) time.Duration {
	if !req.Wait {
		return 0
	}
	wait := 30.0
	if req.WaitTimeout != nil && *req.WaitTimeout >= 0 && *req.WaitTimeout < wait {
		wait = *req.WaitTimeout
	}
	return time.Duration(wait * float64(time.Second))
}

// runOutput reads a server-run command's output from the offsets (stdout
// and stderr apart), waiting for news when asked.
func (s *Server) runOutput(ctx context.Context, out *aio.BashOutputResult, c *command, req aio.BashOutputRequest) error {
	deadline := time.Now().Add(outputWait(req))
	for {
		snap := c.run.snapshot()
		news := int64(len(snap.stdout)) > req.Offset || int64(len(snap.stderr)) > req.StderrOffset
		if news || snap.res != nil || snap.err != nil || !time.Now().Before(deadline) || ctx.Err() != nil {
			out.Stdout, out.Offset = tail(snap.stdout, req.Offset)
			out.Stderr, out.StderrOffset = tail(snap.stderr, req.StderrOffset)
			info := &aio.BashCommandInfo{CommandID: c.id, Command: c.command, Status: aio.StatusRunning}
			switch {
			case snap.res != nil:
				code := exitCode(snap.res)
				info.Status, info.ExitCode = aio.StatusCompleted, &code
				if snap.res.TimedOut {
					info.Status = aio.StatusTimedOut
				} else if snap.res.Signal != "" {
					info.Status = aio.StatusKilled
				}
			case snap.err != nil:
				info.Status = aio.StatusKilled
			}
			out.Command = info
			return nil
		}
		c.run.waitFor(ctx, 50*time.Millisecond)
	}
}

// tail is s from offset on, and the next offset.
func tail(s string, off int64) (string, int64) {
	if off >= int64(len(s)) {
		return "", max(off, int64(len(s)))
	}
	return s[off:], int64(len(s))
}

// fillOutput reads a background task's log from the offset, long-polling
// when asked, and adds its status.
func (s *Server) fillOutput(ctx context.Context, out *aio.BashOutputResult, c *command, req aio.BashOutputRequest) error {
	deadline := time.Now().Add(outputWait(req))
	for {
		o, err := s.h.ReadBackgroundOutput(ctx, c.taskID, req.Offset, outputChunk)
		if err != nil {
			return err
		}
		st, err := s.h.BackgroundStatus(ctx, c.taskID)
		if err != nil {
			return err
		}
		if o.Text != "" || !st.Alive || time.Now().After(deadline) || ctx.Err() != nil {
			out.Stdout, out.Offset = o.Text, max(o.NextOffset, req.Offset)
			out.Command = commandInfo(c, st)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func commandInfo(c *command, st sandbox.BackgroundState) *aio.BashCommandInfo {
	info := &aio.BashCommandInfo{CommandID: c.id, Command: c.command, Status: aio.StatusRunning}
	if st.Alive {
		return info
	}
	code := st.ExitCode
	info.Status = aio.StatusCompleted
	if st.Signal != "" {
		info.Status = aio.StatusKilled
		if code > 128 {
			code = -(code - 128)
		}
	}
	info.ExitCode = &code
	return info
}

func (s *Server) bashKill(w http.ResponseWriter, r *http.Request) {
	var req aio.BashKillRequest
	if !s.decode(w, r, &req, "session_id") {
		return
	}
	force := false
	switch req.Signal {
	case "", "SIGTERM":
	case "SIGKILL":
		force = true
	default:
		s.fail(w, badArg("signal "+req.Signal+": sage sandboxd sends SIGTERM (escalating to SIGKILL after a grace period) or SIGKILL"))
		return
	}
	c, known, found := s.sessions.command(req.SessionID, "")
	if !known {
		envelopeError(w, http.StatusNotFound, "no such session: "+req.SessionID, nil, "")
		return
	}
	switch {
	case found && c.run != nil:
		c.run.stop()
		c.run.wait(r.Context())
	case found:
		if err := s.h.KillBackground(r.Context(), c.taskID, force); err != nil {
			s.fail(w, err)
			return
		}
	}
	ok(w, nil)
}
