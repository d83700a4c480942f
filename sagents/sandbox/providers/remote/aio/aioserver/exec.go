package aioserver

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
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

func (s *Server) bashExec(w http.ResponseWriter, r *http.Request) {
	var req aio.BashExecRequest
	if !s.decode(w, r, &req, "command") {
		return
	}
	dir, err := s.sessions.use(req.SessionID, req.ExecDir)
	if err != nil {
		s.fail(w, err)
		return
	}
	opts, err := s.execOptions(dir, req.Env, req.HardTimeout, req.MaxOutputLength)
	if err != nil {
		s.fail(w, err)
		return
	}
	if req.AsyncMode {
		s.bashStart(w, r.Context(), req, opts)
		return
	}
	res, err := s.h.ExecuteCommand(r.Context(), req.Command, opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	status := aio.StatusCompleted
	if res.TimedOut {
		status = aio.StatusTimedOut
	}
	code := exitCode(res)
	ok(w, aio.BashExecResult{SessionID: orNew(req.SessionID), CommandID: sandbox.NewID("cmd"), Command: req.Command,
		Status: status, Stdout: &res.Stdout, Stderr: &res.Stderr, ExitCode: &code,
		Offset: int64(len(res.Stdout)), StderrOffset: int64(len(res.Stderr))})
}

func orNew(id string) string {
	if id == "" {
		return sandbox.NewID("sess")
	}
	return id
}

// bashStart runs an async command as a background task of the Handle; its
// stdout and stderr share the task's log, reported as stdout.
func (s *Server) bashStart(w http.ResponseWriter, ctx context.Context, req aio.BashExecRequest, opts sandbox.ExecOptions) {
	sid := req.SessionID
	if sid == "" {
		sess, err := s.sessions.create("", opts.Workdir)
		if err != nil {
			s.fail(w, err)
			return
		}
		sid = sess.id
	}
	opts.Timeout = 0
	task, err := s.h.StartBackground(ctx, req.Command, opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	c := &asyncCommand{id: sandbox.NewID("cmd"), command: req.Command, taskID: task.ID}
	s.sessions.addAsync(sid, c)
	empty := ""
	ok(w, aio.BashExecResult{SessionID: sid, CommandID: c.id, Command: req.Command, Status: aio.StatusRunning,
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
	if err := s.fillOutput(r.Context(), &out, c, req); err != nil {
		s.fail(w, err)
		return
	}
	ok(w, out)
}

// fillOutput reads the command's log from the offset, long-polling when
// asked, and adds its status.
func (s *Server) fillOutput(ctx context.Context, out *aio.BashOutputResult, c *asyncCommand, req aio.BashOutputRequest) error {
	deadline := time.Now()
	if req.Wait {
		wait := 30.0
		if req.WaitTimeout != nil && *req.WaitTimeout >= 0 && *req.WaitTimeout < wait {
			wait = *req.WaitTimeout
		}
		deadline = deadline.Add(time.Duration(wait * float64(time.Second)))
	}
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

func commandInfo(c *asyncCommand, st sandbox.BackgroundState) *aio.BashCommandInfo {
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
	if found {
		if err := s.h.KillBackground(r.Context(), c.taskID, force); err != nil {
			s.fail(w, err)
			return
		}
	}
	ok(w, nil)
}

func (s *Server) bashCreate(w http.ResponseWriter, r *http.Request) {
	var req aio.BashSessionCreateRequest
	if !s.decode(w, r, &req) {
		return
	}
	sess, err := s.sessions.create(req.SessionID, req.ExecDir)
	if err != nil {
		s.fail(w, err)
		return
	}
	ok(w, aio.BashSessionInfo{SessionID: sess.id, Status: "ready", WorkingDir: sess.workingDir,
		CreatedAt: sess.created, LastUsedAt: sess.lastUsed, CommandCount: sess.count})
}

func (s *Server) bashClose(w http.ResponseWriter, r *http.Request) {
	s.closeSession(w, r)
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	found, err := s.sessions.remove(r.Context(), s.h, id)
	switch {
	case !found:
		envelopeError(w, http.StatusNotFound, "no such session: "+id, nil, "")
	case err != nil:
		s.fail(w, err)
	default:
		ok(w, nil)
	}
}

func (s *Server) shellExec(w http.ResponseWriter, r *http.Request) {
	var req aio.ShellExecRequest
	if !s.decode(w, r, &req, "command") {
		return
	}
	if req.AsyncMode {
		s.fail(w, badArg("async_mode is not supported on /v1/shell/exec by sage sandboxd; use /v1/bash/exec"))
		return
	}
	dir, err := s.sessions.use(req.ID, req.ExecDir)
	if err != nil {
		s.fail(w, err)
		return
	}
	opts, err := s.execOptions(dir, nil, req.HardTimeout, nil)
	if err != nil {
		s.fail(w, err)
		return
	}
	res, err := s.h.ExecuteCommand(r.Context(), req.Command, opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	status := aio.ShellCompleted
	if res.TimedOut {
		status = aio.ShellHardTimeout
	}
	output := res.Stdout + res.Stderr
	code := exitCode(res)
	ok(w, aio.ShellCommandResult{SessionID: orNew(req.ID), Command: req.Command, Status: status, Output: &output, ExitCode: &code})
}

func (s *Server) shellCreate(w http.ResponseWriter, r *http.Request) {
	var req aio.ShellCreateSessionRequest
	if !s.decode(w, r, &req) {
		return
	}
	sess, err := s.sessions.create(req.ID, req.ExecDir)
	if err != nil {
		s.fail(w, err)
		return
	}
	ok(w, aio.ShellCreateSessionResponse{SessionID: sess.id, WorkingDir: sess.workingDir})
}

func (s *Server) shellDelete(w http.ResponseWriter, r *http.Request) { s.closeSession(w, r) }
