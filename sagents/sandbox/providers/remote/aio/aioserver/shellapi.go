package aioserver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"

	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// shellExec is POST /v1/shell/exec: the command runs in the session's
// Shell (state kept between calls), stdout and stderr in one pipe, stdin a
// pipe /v1/shell/write feeds. With timeout (the seconds this call waits)
// a command still running is answered with status running at once and
// goes on; /v1/shell/view, wait and kill reach it later. async_mode is the
// same with a timeout of 0. With no_change_timeout, a command whose output
// has not changed for that many seconds is answered with status
// no_change_timeout and goes on too (waiting for input, say). Output is
// capped at 30000 bytes (head and tail kept) unless truncate is false or
// max_output_length says otherwise.
func (s *Server) shellExec(w http.ResponseWriter, r *http.Request) {
	var req shellExecRequest
	if !s.decode(w, r, &req, "command") {
		return
	}
	maxOut := req.MaxOutputLength
	switch {
	case req.Truncate != nil && !*req.Truncate:
		uncapped := 0 // truncate false: all of it (up to the server's cap)
		maxOut = &uncapped
	case maxOut == nil:
		def := shellMaxOutput
		maxOut = &def
	}
	opts, wait, failed := s.execArgs(w, req.ExecDir, nil, req.HardTimeout, maxOut, req.Timeout)
	if failed {
		return
	}
	quiet, err := waitOf(req.NoChangeTimeout) // 0, like none: no such wait
	if err != nil {
		s.fail(w, badArg("no_change_timeout must be a non-negative number of seconds (at most a week)"))
		return
	}
	if req.AsyncMode {
		wait = 0
	}
	sess, err := s.sessions.use(r.Context(), req.ID)
	if err != nil {
		s.fail(w, err)
		return
	}
	outlive := wait
	if quiet > 0 {
		outlive = 0 // answered before its end, it goes on: not the request's
	}
	c, err := s.startCommand(r, sess, sess.shell, req.Command, opts, runSpec{merge: true, stdin: true, limit: opts.OutputLimit}, outlive)
	if err != nil {
		s.fail(w, err)
		return
	}
	if acceptsEventStream(r) {
		s.streamShell(w, r, sess.id, req.Command, c, wait, quiet)
		return
	}
	_, quietFor := c.run.waitQuiet(r.Context(), wait, quiet)
	snap := c.run.snapshot()
	if snap.err != nil {
		s.fail(w, snap.err)
		return
	}
	status, code := shellStatus(snap)
	if quietFor && status == aio.ShellRunning {
		status = shellNoChange
	}
	ok(w, aio.ShellCommandResult{SessionID: sess.id, Command: req.Command, Status: status, Output: &snap.stdout, ExitCode: code})
}

// acceptsEventStream reports whether the client asked for an event
// stream (Accept: text/event-stream), as the OpenAPI document of
// /v1/shell/exec offers.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// streamEvery is how often a streamed shell command's output is looked at.
const streamEvery = 100 * time.Millisecond

// streamShell answers /v1/shell/exec as an event stream: each event's data
// is the answer the call would give at that moment (the envelope of a
// ShellCommandResult, the output so far), sent whenever the output grew,
// and the last one is the answer the call gives without streaming (the
// command's end, or still running once the wait or no_change_timeout
// passed).
func (s *Server) streamShell(w http.ResponseWriter, r *http.Request, sessID, command string, c *command, wait, quiet time.Duration) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	msg := okMessage
	send := func(snap runSnapshot, status string, code *int) {
		out := snap.stdout
		b, err := json.Marshal(aio.Envelope[any]{Success: true, Message: &msg, Data: aio.ShellCommandResult{
			SessionID: sessID, Command: command, Status: status, Output: &out, ExitCode: code}})
		if err != nil {
			return
		}
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	start := time.Now()
	sent, changed := -1, start
	for {
		ended := c.run.waitFor(r.Context(), streamEvery)
		if r.Context().Err() != nil {
			return
		}
		snap := c.run.snapshot()
		status, code := shellStatus(snap)
		if ended || snap.err != nil {
			if snap.err != nil {
				status, code = aio.ShellTerminated, nil
			}
			send(snap, status, code)
			return
		}
		now := time.Now()
		if len(snap.stdout) != sent {
			sent, changed = len(snap.stdout), now
			send(snap, status, code)
		}
		switch {
		case wait >= 0 && now.Sub(start) >= wait:
			send(snap, status, code)
			return
		case quiet > 0 && now.Sub(changed) >= quiet:
			send(snap, shellNoChange, code)
			return
		}
	}
}

// shellNoChange is the status of a command answered because its output
// did not change for no_change_timeout seconds; it goes on running.
const shellNoChange = "no_change_timeout"

// shellMaxOutput is the spec's cap of a shell command's output (truncate
// true, the default): 30000, in bytes here.
const shellMaxOutput = 30000

// shellExecRequest is POST /v1/shell/exec with the fields the SDKs send
// besides the ones package aio's client uses.
type shellExecRequest struct {
	aio.ShellExecRequest
	Truncate        *bool    `json:"truncate"`
	NoChangeTimeout *float64 `json:"no_change_timeout"`
	MaxOutputLength *int     `json:"max_output_length"`
}

func shellStatus(snap runSnapshot) (string, *int) {
	switch {
	case snap.res == nil && snap.err == nil:
		return aio.ShellRunning, nil
	case snap.err != nil:
		return aio.ShellTerminated, nil
	}
	code := exitCode(snap.res)
	switch {
	case snap.res.TimedOut:
		return aio.ShellHardTimeout, &code
	case snap.res.Signal != "":
		return aio.ShellTerminated, &code
	}
	return aio.ShellCompleted, &code
}

// latestRun is the session's latest command the server runs, or an
// answer already written.
func (s *Server) latestRun(w http.ResponseWriter, id string) (*command, bool) {
	c, known, found := s.sessions.command(id, "")
	if !known {
		envelopeError(w, http.StatusNotFound, "no such session: "+id, nil, "")
		return nil, false
	}
	if !found {
		envelopeError(w, http.StatusNotFound, "session "+id+" has run no command", nil, "")
		return nil, false
	}
	return c, true
}

type shellIDRequest struct {
	ID string `json:"id"`
}

// requestedRun decodes a shellIDRequest and finds its session's latest
// command, answering the error itself when there is none.
func (s *Server) requestedRun(w http.ResponseWriter, r *http.Request) (id string, c *command, found bool) {
	var req shellIDRequest
	if !s.decode(w, r, &req, "id") {
		return "", nil, false
	}
	c, found = s.latestRun(w, req.ID)
	return req.ID, c, found
}

type shellViewResult struct {
	Output    string  `json:"output"`
	SessionID string  `json:"session_id"`
	Status    string  `json:"status"`
	Command   *string `json:"command"`
	ExitCode  *int    `json:"exit_code"`
}

// shellView is POST /v1/shell/view: the output of the session's latest
// command so far, and its status.
func (s *Server) shellView(w http.ResponseWriter, r *http.Request) {
	id, c, found := s.requestedRun(w, r)
	if !found {
		return
	}
	snap := c.run.snapshot()
	status, code := shellStatus(snap)
	ok(w, shellViewResult{Output: snap.stdout, SessionID: id, Status: status, Command: &c.command, ExitCode: code})
}

type shellWaitRequest struct {
	ID             string `json:"id"`
	Seconds        *int   `json:"seconds"`
	MaxWaitSeconds *int   `json:"max_wait_seconds"`
}

type shellStatusResult struct {
	Status string `json:"status"`
}

// shellWait is POST /v1/shell/wait: wait until the latest command ends,
// at most seconds (default and cap: max_wait_seconds, else 600).
func (s *Server) shellWait(w http.ResponseWriter, r *http.Request) {
	var req shellWaitRequest
	if !s.decode(w, r, &req, "id") {
		return
	}
	limit := 600
	if req.MaxWaitSeconds != nil && *req.MaxWaitSeconds >= 0 {
		limit = min(*req.MaxWaitSeconds, limit)
	}
	secs := limit
	if req.Seconds != nil {
		if *req.Seconds < 0 {
			s.fail(w, invalid([]any{"body", "seconds"}, "value_error", "Input should be greater than or equal to 0"))
			return
		}
		secs = min(*req.Seconds, limit)
	}
	c, found := s.latestRun(w, req.ID)
	if !found {
		return
	}
	c.run.waitFor(r.Context(), time.Duration(secs)*time.Second)
	status, _ := shellStatus(c.run.snapshot())
	ok(w, shellStatusResult{Status: status})
}

type shellKillResult struct {
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	Returncode *int   `json:"returncode"`
}

// shellKill is POST /v1/shell/kill: kill the latest command (SIGTERM,
// then SIGKILL after the Handle's grace period) and wait for its end.
func (s *Server) shellKill(w http.ResponseWriter, r *http.Request) {
	_, c, found := s.requestedRun(w, r)
	if !found {
		return
	}
	c.run.stop()
	c.run.wait(r.Context())
	status, code := shellStatus(c.run.snapshot())
	ok(w, shellKillResult{Status: status, ExitCode: code, Returncode: code})
}

type shellWriteRequest struct {
	ID         string `json:"id"`
	Input      string `json:"input"`
	PressEnter *bool  `json:"press_enter"`
}

type shellWriteResult struct {
	Status string `json:"status"`
}

// shellWrite is POST /v1/shell/write: send input to the stdin of the
// session's running command (a newline follows unless press_enter is
// false).
func (s *Server) shellWrite(w http.ResponseWriter, r *http.Request) {
	var req shellWriteRequest
	if !s.decode(w, r, &req, "id", "input") {
		return
	}
	c, found := s.latestRun(w, req.ID)
	if !found {
		return
	}
	in := req.Input
	if req.PressEnter == nil || *req.PressEnter {
		in += "\n"
	}
	if err := c.run.write([]byte(in)); err != nil {
		s.fail(w, err)
		return
	}
	status, _ := shellStatus(c.run.snapshot())
	ok(w, shellWriteResult{Status: status})
}

func (s *Server) shellCreate(w http.ResponseWriter, r *http.Request) {
	var req aio.ShellCreateSessionRequest
	if !s.decode(w, r, &req) {
		return
	}
	sess, err := s.sessions.create(r.Context(), req.ID, req.ExecDir)
	if err != nil {
		s.fail(w, err)
		return
	}
	ok(w, aio.ShellCreateSessionResponse{SessionID: sess.id, WorkingDir: sess.shell.Dir()})
}

func (s *Server) shellDelete(w http.ResponseWriter, r *http.Request) { s.closeSession(w, r) }

type shellSessionInfo struct {
	WorkingDir     string    `json:"working_dir"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	AgeSeconds     int       `json:"age_seconds"`
	Status         string    `json:"status"`
	CurrentCommand *string   `json:"current_command"`
}

// shellSessions is GET /v1/shell/sessions: {sessions: {id: info}}.
func (s *Server) shellSessions(w http.ResponseWriter, _ *http.Request) {
	out := map[string]shellSessionInfo{}
	for _, sess := range s.sessions.list() {
		v := s.sessions.view(sess)
		st := "idle"
		if v.current != nil {
			st = "active"
		}
		out[v.id] = shellSessionInfo{WorkingDir: v.dir, CreatedAt: v.created, LastUsedAt: v.lastUsed,
			AgeSeconds: int(time.Since(v.created).Seconds()), Status: st, CurrentCommand: v.current}
	}
	ok(w, map[string]any{"sessions": out})
}

// shellSessionsDelete is DELETE /v1/shell/sessions: close them all.
func (s *Server) shellSessionsDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.sessions.closeAll(r.Context()); err != nil {
		s.fail(w, err)
		return
	}
	ok(w, nil)
}

// bashSessions is GET /v1/bash/sessions: every session, oldest first.
func (s *Server) bashSessions(w http.ResponseWriter, _ *http.Request) {
	out := []aio.BashSessionInfo{}
	for _, sess := range s.sessions.list() {
		out = append(out, bashInfo(s.sessions.view(sess)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	ok(w, out)
}

func bashInfo(v sessionView) aio.BashSessionInfo {
	st := "ready"
	if v.current != nil {
		st = "running"
	}
	return aio.BashSessionInfo{SessionID: v.id, Status: st, WorkingDir: v.bashDir, CreatedAt: v.created,
		LastUsedAt: v.lastUsed, CurrentCommand: v.current, CommandCount: v.count}
}

func (s *Server) bashCreate(w http.ResponseWriter, r *http.Request) {
	var req aio.BashSessionCreateRequest
	if !s.decode(w, r, &req) {
		return
	}
	sess, err := s.sessions.create(r.Context(), req.SessionID, req.ExecDir)
	if err != nil {
		s.fail(w, err)
		return
	}
	ok(w, bashInfo(s.sessions.view(sess)))
}

func (s *Server) bashClose(w http.ResponseWriter, r *http.Request) { s.closeSession(w, r) }

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	found, err := s.sessions.remove(r.Context(), id)
	switch {
	case !found:
		envelopeError(w, http.StatusNotFound, "no such session: "+id, nil, "")
	case err != nil:
		s.fail(w, err)
	default:
		ok(w, nil)
	}
}
