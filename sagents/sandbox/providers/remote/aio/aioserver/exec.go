package aioserver

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// Output caps: the spec's default max_output_length, and the cap used when
// a client disables truncation (0).
const (
	defaultMaxOutput = 50000
	uncappedOutput   = 32 << 20
)

// An async command runs at most asyncTimeout without hard_timeout, and
// keeps a window of at least asyncWindow bytes of each stream.
const (
	asyncTimeout = 7 * 24 * time.Hour
	asyncWindow  = 4 << 20
)

func (s *Server) execOptions(dir string, env map[string]string, hard *float64, maxOut *int) (driver.ExecOptions, error) {
	for k := range env {
		if !driver.ValidEnvName(k) {
			return driver.ExecOptions{}, badArg("env: invalid variable name " + k)
		}
	}
	o := driver.ExecOptions{Workdir: dir, Env: env, Timeout: s.opts.DefaultTimeout}
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
func exitCode(res *driver.CommandResult) int {
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

// execArgs reads the options and the wait (waitOf timeout) of a command
// request of /v1/bash/exec or /v1/shell/exec; when one is wrong it answers
// the request with the error and failed is true.
func (s *Server) execArgs(w http.ResponseWriter, dir string, env map[string]string, hard *float64, maxOut *int, timeout *float64) (opts driver.ExecOptions, wait time.Duration, failed bool) {
	opts, err := s.execOptions(dir, env, hard, maxOut)
	if err == nil {
		wait, err = waitOf(timeout)
	}
	if err != nil {
		s.fail(w, err)
		return opts, 0, true
	}
	return opts, wait, false
}

// plainShell runs each command afresh: /v1/bash/exec commands do not
// share state (the remote Handle runs unrelated commands in a pool of
// sessions and relies on it); /v1/shell/exec sessions do.
type plainShell struct{ h *sandbox.Sandbox }

func (p plainShell) Exec(ctx context.Context, command string, opts driver.ExecOptions, _ bool) (*driver.CommandResult, error) {
	return p.h.ExecuteCommand(ctx, command, opts)
}
func (p plainShell) Dir() string                 { return "" }
func (p plainShell) Close(context.Context) error { return nil }

// startCommand runs command in session sess and records it. When the
// HTTP call waits until the end (wait < 0), the command is cancelled if
// the client goes away; with a timeout it outlives the request.
func (s *Server) startCommand(r *http.Request, sess *session, sh Shell, text string, opts driver.ExecOptions, spec runSpec, wait time.Duration) (*command, error) {
	parent := s.base
	if wait < 0 {
		ctx, cancel := context.WithCancel(s.base)
		// The request's end cancels the command; by then it has ended
		// unless the client went away.
		context.AfterFunc(r.Context(), cancel)
		parent = ctx
	}
	rn, err := startRun(parent, sh, text, opts, spec)
	if err != nil {
		return nil, err
	}
	c := &command{id: driver.NewID("cmd"), command: text, run: rn}
	s.sessions.add(sess.id, c)
	return c, nil
}

func (s *Server) bashExec(w http.ResponseWriter, r *http.Request) {
	var req aio.BashExecRequest
	if !s.decode(w, r, &req, "command") {
		return
	}
	opts, wait, failed := s.execArgs(w, req.ExecDir, req.Env, req.HardTimeout, req.MaxOutputLength, req.Timeout)
	if failed {
		return
	}
	sess, err := s.sessions.use(r.Context(), req.SessionID)
	if err != nil {
		s.fail(w, err)
		return
	}
	if req.ExecDir != "" {
		// The directory becomes the session's default only once a command
		// could run there.
		if err := s.sessions.checkDir(r.Context(), req.ExecDir); err != nil {
			s.fail(w, err)
			return
		}
	}
	opts.Workdir = s.sessions.bashWorkdir(sess, req.ExecDir)
	if req.AsyncMode {
		s.bashStart(w, r, sess, req, opts)
		return
	}
	c, err := s.startCommand(r, sess, plainShell{s.h}, req.Command, opts, runSpec{limit: opts.OutputLimit / 2}, wait)
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

// bashStart runs an async command in the server, as a sync one that
// nobody waits for: stdout and stderr stay apart (each keeps a window of
// asyncWindow bytes, offsets absolute), its stdin is a pipe /v1/bash/write
// feeds, and it runs until it ends, hard_timeout or a kill.
func (s *Server) bashStart(w http.ResponseWriter, r *http.Request, sess *session, req aio.BashExecRequest, opts driver.ExecOptions) {
	if req.HardTimeout == nil {
		opts.Timeout = asyncTimeout
	}
	// The callbacks keep the output; the final result's copy stays small.
	opts.OutputLimit = 64 << 10
	c, err := s.startCommand(r, sess, plainShell{s.h}, req.Command, opts, runSpec{stdin: true, window: true, limit: asyncWindow, pid: true}, 0)
	if err != nil {
		s.fail(w, err)
		return
	}
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
	s.runOutput(r.Context(), &out, c, req)
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
func (s *Server) runOutput(ctx context.Context, out *aio.BashOutputResult, c *command, req aio.BashOutputRequest) {
	deadline := time.Now().Add(outputWait(req))
	for {
		snap := c.run.snapshot()
		news := snap.outBase+int64(len(snap.stdout)) > req.Offset || snap.errBase+int64(len(snap.stderr)) > req.StderrOffset
		if news || snap.res != nil || snap.err != nil || !time.Now().Before(deadline) || ctx.Err() != nil {
			out.Stdout, out.Offset = tail(snap.stdout, snap.outBase, req.Offset)
			out.Stderr, out.StderrOffset = tail(snap.stderr, snap.errBase, req.StderrOffset)
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
			return
		}
		c.run.waitFor(ctx, 20*time.Millisecond)
	}
}

// tail is the part of a stream from offset off on, given the stream's
// kept bytes text starting at offset base, and the next offset. Bytes
// before base are gone: reading starts at base.
func tail(text string, base, off int64) (string, int64) {
	end := base + int64(len(text))
	if off >= end {
		return "", off
	}
	return text[max(off, base)-base:], end
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
		s.fail(w, badArg("signal "+req.Signal+": sage sandboxd takes SIGTERM (SIGKILL follows after the sandbox's grace period) or SIGKILL"))
		return
	}
	c, known, found := s.sessions.command(req.SessionID, "")
	if !known {
		envelopeError(w, http.StatusNotFound, "no such session: "+req.SessionID, nil, "")
		return
	}
	if found {
		// The Handle ends a cancelled command with SIGTERM, then SIGKILL
		// after its grace period. SIGKILL is sent at once where the
		// server sees the command's pid (an async command in a
		// passthrough sandbox); elsewhere it takes the grace period.
		if force {
			c.run.kill(s.h.Type() == driver.Passthrough)
		} else {
			c.run.stop()
		}
		c.run.wait(r.Context())
	}
	ok(w, nil)
}

// bashWriteRequest is POST /v1/bash/write.
type bashWriteRequest struct {
	SessionID string `json:"session_id"`
	CommandID string `json:"command_id"`
	Input     string `json:"input"`
}

// bashWrite is POST /v1/bash/write: input, as given (no newline added),
// to the stdin of an async command (command_id, or the session's latest).
// A sync command's stdin is /dev/null: writing to it is a 400.
func (s *Server) bashWrite(w http.ResponseWriter, r *http.Request) {
	var req bashWriteRequest
	if !s.decode(w, r, &req, "session_id", "input") {
		return
	}
	c, known, found := s.sessions.command(req.SessionID, req.CommandID)
	switch {
	case !known:
		envelopeError(w, http.StatusNotFound, "no such session: "+req.SessionID, nil, "")
		return
	case !found:
		envelopeError(w, http.StatusNotFound, "no such command in session "+req.SessionID+": "+req.CommandID, nil, "")
		return
	}
	if err := c.run.write([]byte(req.Input)); err != nil {
		s.fail(w, err)
		return
	}
	ok(w, nil)
}
