package opensandboxtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Execd is the fake execd of one sandbox. It answers as the real execd
// (upstream 4db3a993) did in the recordings under ../testdata: the same
// event framing and order, exit codes, file semantics and the grace
// second after each command's last event.
type Execd struct {
	s   *Server
	sb  *Sandbox
	srv *httptest.Server

	mu       sync.Mutex
	cmds     map[string]*command
	contexts map[string]*pyContext
	seq      int
	closed   bool
}

type command struct {
	id         string
	content    string
	proc       *os.Process
	background bool
	done       chan struct{}
	exit       int
	errMsg     string
	started    time.Time
	ended      time.Time
}

func newExecd(s *Server, sb *Sandbox) *Execd {
	e := &Execd{s: s, sb: sb, cmds: map[string]*command{}, contexts: map[string]*pyContext{}}
	e.srv = httptest.NewServer(validated(http.HandlerFunc(e.serve), s.record))
	if s.ExecdDown {
		e.srv.Close()
	}
	return e
}

// Addr is host:port of the execd.
func (e *Execd) Addr() string { return strings.TrimPrefix(e.srv.URL, "http://") }

// Workspace is the sandbox's working directory on this host.
func (e *Execd) Workspace() string { return filepath.Join(e.sb.Dir, "workspace") }

// Close kills every command and interpreter and stops serving.
func (e *Execd) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	cmds := make([]*command, 0, len(e.cmds))
	for _, c := range e.cmds {
		cmds = append(cmds, c)
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
	}
	for _, c := range e.contexts {
		c.kill()
	}
	e.mu.Unlock()
	e.srv.CloseClientConnections()
	e.srv.Close()
	for _, c := range cmds {
		<-c.done
	}
}

func (e *Execd) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-EXECD-ACCESS-TOKEN") != e.s.ExecdToken {
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "missing or wrong X-EXECD-ACCESS-TOKEN")
		return
	}
	p := r.URL.Path
	switch {
	case p == "/ping" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusOK)
	case p == "/command" && r.Method == http.MethodPost:
		e.runCommand(w, r)
	case p == "/command" && r.Method == http.MethodDelete:
		e.interrupt(w, r)
	case strings.HasPrefix(p, "/command/status/") && r.Method == http.MethodGet:
		e.status(w, strings.TrimPrefix(p, "/command/status/"))
	case strings.HasPrefix(p, "/command/") && strings.HasSuffix(p, "/logs") && r.Method == http.MethodGet:
		e.logs(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/command/"), "/logs"))
	case strings.HasPrefix(p, "/files") || strings.HasPrefix(p, "/directories"):
		e.files(w, r)
	case strings.HasPrefix(p, "/code"):
		e.code(w, r)
	case p == "/metrics" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"cpu_count": 2.0, "cpu_used_pct": 0.0,
			"mem_total_mib": 1024.0, "mem_used_mib": 0.0, "timestamp": time.Now().UnixMilli()})
	default:
		e.s.violation(w, "execd %s %s: no such operation", r.Method, p)
	}
}

// event is one stream event, with execd's field order.
type event struct {
	Type           string         `json:"type,omitempty"`
	Text           string         `json:"text,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	ExecutionTime  int64          `json:"execution_time,omitempty"`
	Timestamp      int64          `json:"timestamp,omitempty"`
	Results        map[string]any `json:"results,omitempty"`
	Error          *eventError    `json:"error,omitempty"`
}

type eventError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// sse writes events as execd does: each a bare JSON object followed by
// an empty line, flushed at once; the headers go with the first event.
type sse struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	sent bool
	done bool
}

// newSSE returns a stream writer; call end before the handler returns.
func newSSE(w http.ResponseWriter) *sse { return &sse{w: w} }

// end stops every later write (a ping in flight).
func (s *sse) end() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

func (s *sse) send(ev event) {
	ev.Timestamp = time.Now().UnixMilli()
	b, _ := json.Marshal(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	if !s.sent {
		s.sent = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	_, _ = s.w.Write(append(b, '\n', '\n'))
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// failLate writes execd's error object into a stream that has begun: the
// status stays 200.
func (s *sse) failLate(code, msg string) {
	b, _ := json.Marshal(map[string]string{"code": code, "message": msg})
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(b)
}

// pinger sends execd's "ping" events: one at once, before pinger returns
// (from a goroutine, a loaded machine could end a short stream before the
// first one went out, and the recordings always have it), then every 3 s.
func (s *sse) pinger(stop <-chan struct{}) {
	s.send(event{Type: "ping", Text: "pong"})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Second):
			}
			s.send(event{Type: "ping", Text: "pong"})
		}
	}()
}

type runCommandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd"`
	Background bool              `json:"background"`
	Timeout    int64             `json:"timeout"`
	Envs       map[string]string `json:"envs"`
}

// shell is the shell execd runs commands with: bash, or sh without it.
func shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

func (e *Execd) outFile(id, ext string) string { return filepath.Join(e.s.ExecdTmp, id+ext) }

func (e *Execd) runCommand(w http.ResponseWriter, r *http.Request) {
	var req runCommandRequest
	if err := decodeStrict(r, &req); err != nil {
		e.s.violation(w, "%v", err)
		return
	}
	if req.Command == "" || (req.Cwd != "" && !filepath.IsAbs(req.Cwd)) || req.Timeout < 0 {
		e.s.violation(w, "run command: command required, cwd absolute, timeout >= 0 (got %+v)", req)
		return
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = e.Workspace()
	}
	if _, err := os.Stat(cwd); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "invalid request, validation error working directory does not exist: "+cwd+": "+err.Error())
		return
	}
	cmd := exec.Command(shell(), "-c", req.Command)
	cmd.Args[0] = filepath.Base(cmd.Args[0])
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + e.Workspace(), "LANG=C.UTF-8"}
	for k, v := range e.sb.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range req.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &command{content: req.Command, done: make(chan struct{}), started: time.Now(), background: req.Background}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "CLOSED", "execd is shutting down")
		return
	}
	e.seq++
	c.id = newID()
	e.mu.Unlock()
	out := newSSE(w)
	defer out.end()
	stopPing := make(chan struct{})
	defer close(stopPing)
	var tails sync.WaitGroup
	if req.Background {
		f, err := os.Create(e.outFile(c.id, ".output"))
		if err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
			return
		}
		defer f.Close()
		devNull, _ := os.Open(os.DevNull)
		defer devNull.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, f, f
		out.send(event{Type: "init", Text: c.id})
		out.pinger(stopPing)
	} else {
		stdout, err1 := os.Create(e.outFile(c.id, ".stdout"))
		stderr, err2 := os.Create(e.outFile(c.id, ".stderr"))
		if err := errors.Join(err1, err2); err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
			return
		}
		defer stdout.Close()
		defer stderr.Close()
		cmd.Stdout, cmd.Stderr = stdout, stderr
	}
	stopTail := make(chan struct{})
	if !req.Background {
		for _, t := range []struct{ ext, kind string }{{".stdout", "stdout"}, {".stderr", "stderr"}} {
			tails.Add(1)
			go func() {
				defer tails.Done()
				tailLines(e.outFile(c.id, t.ext), stopTail, func(text string) { out.send(event{Type: t.kind, Text: text}) })
			}()
		}
	}
	if err := cmd.Start(); err != nil {
		close(stopTail)
		tails.Wait()
		out.send(event{Type: "init", Text: c.id})
		out.send(event{Type: "error", Error: &eventError{EName: "CommandExecError", EValue: err.Error(), Traceback: []string{err.Error()}}})
		return
	}
	c.proc = cmd.Process
	e.mu.Lock()
	e.cmds[c.id] = c
	e.mu.Unlock()
	if !req.Background {
		out.send(event{Type: "init", Text: c.id})
		out.pinger(stopPing)
	}
	// As execd: a timeout kills the process group; a client that goes
	// away does not end the command (only an interrupt or the timeout).
	var timer *time.Timer
	if req.Timeout > 0 {
		timer = time.AfterFunc(time.Duration(req.Timeout)*time.Millisecond, func() { _ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL) })
	}
	wait := func() {
		err := cmd.Wait()
		if timer != nil {
			timer.Stop()
		}
		c.exit, c.errMsg = exitCode(err)
		c.ended = time.Now()
		close(c.done)
	}
	if req.Background {
		go wait()
		out.send(event{Type: "execution_complete", ExecutionTime: max(time.Since(c.started).Milliseconds(), 1)})
	} else {
		wait()
		close(stopTail)
		tails.Wait()
		if c.errMsg != "" {
			out.send(event{Type: "error", Error: &eventError{EName: "CommandExecError", EValue: strconv.Itoa(c.exit), Traceback: []string{c.errMsg}}})
		} else {
			out.send(event{Type: "execution_complete", ExecutionTime: max(c.ended.Sub(c.started).Milliseconds(), 1)})
		}
	}
	// execd holds every command stream open for its grace period
	// (EXECD_API_GRACE_SHUTDOWN) after the last event.
	select {
	case <-r.Context().Done():
	case <-time.After(e.s.Grace):
	}
}

// newID is a command id as execd makes them: 32 hex digits.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// exitCode is execd's exit code and error text for cmd.Wait's error: the
// exit status, or -1 and Go's "signal: killed" for a signal.
func exitCode(err error) (int, string) {
	if err == nil {
		return 0, ""
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), err.Error()
	}
	return 1, err.Error()
}

// tailLines reads file every 100 ms as execd does and hands on each
// complete line without its end ("\n" or "\r", a "\r\n" pair once), an
// empty line as "\n"; at stop it reads the rest and hands on a last
// line without an end as it is.
func tailLines(file string, stop <-chan struct{}, emit func(string)) {
	var pos int64
	cr := false
	var line []byte
	buf := make([]byte, 1<<20)
	read := func(final bool) {
		f, err := os.Open(file)
		if err != nil {
			return
		}
		defer f.Close()
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return
		}
		line = line[:0]
		for {
			n, err := f.Read(buf)
			pos += int64(n)
			for chunk := buf[:n]; len(chunk) > 0; {
				i := bytes.IndexAny(chunk, "\r\n")
				if i < 0 {
					line, cr = append(line, chunk...), false
					break
				}
				if i > 0 {
					line, cr = append(line, chunk[:i]...), false
				}
				c := chunk[i]
				switch {
				case len(line) > 0:
					emit(string(line))
					line = line[:0]
				case c == '\n' && cr:
				default:
					emit("\n")
				}
				cr = c == '\r'
				chunk = chunk[i+1:]
			}
			if err != nil {
				break
			}
		}
		if len(line) > 0 {
			if final {
				emit(string(line))
			} else {
				pos -= int64(len(line)) // read again when it ends
			}
		}
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			read(true)
			return
		case <-t.C:
			read(false)
		}
	}
}

func (e *Execd) lookup(id string) *command {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cmds[id]
}

// find returns the what called id in m (one of e's maps), or answers 404
// and returns nil.
func find[V any](e *Execd, w http.ResponseWriter, m map[string]*V, what, id string) *V {
	e.mu.Lock()
	v := m[id]
	e.mu.Unlock()
	if v == nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no "+what+" "+id)
	}
	return v
}

// interrupt sends SIGTERM to the command's process group and SIGKILL
// after 3 s if it still runs, answering when it ended (as execd).
func (e *Execd) interrupt(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		e.s.violation(w, "interrupt: id is required")
		return
	}
	c := e.lookup(id)
	if c == nil {
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error interruptting code context. no such session")
		return
	}
	select {
	case <-c.done:
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "error interruptting code context. command session "+id+" is not running")
		return
	default:
	}
	_ = syscall.Kill(-c.proc.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && syscall.Kill(-c.proc.Pid, 0) == nil {
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
	w.WriteHeader(http.StatusOK)
}

// commandStatus is execd's status answer, in its field order.
type commandStatus struct {
	ID         string     `json:"id"`
	Content    string     `json:"content,omitempty"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

func (e *Execd) status(w http.ResponseWriter, id string) {
	c := e.lookup(id)
	if c == nil {
		writeError(w, http.StatusNotFound, "INVALID_REQUEST_BODY", "command not found: "+id)
		return
	}
	v := commandStatus{ID: c.id, Content: c.content, Running: true, StartedAt: c.started.UTC()}
	select {
	case <-c.done:
		exit, ended := c.exit, c.ended.UTC()
		v.Running, v.ExitCode, v.Error, v.FinishedAt = false, &exit, c.errMsg, &ended
	default:
	}
	writeJSON(w, http.StatusOK, v)
}

// logs answers a background command's output from byte offset cursor on,
// and the offset it ends at in EXECD-COMMANDS-TAIL-CURSOR.
func (e *Execd) logs(w http.ResponseWriter, r *http.Request, id string) {
	c := e.lookup(id)
	if c == nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "command not found: "+id)
		return
	}
	if !c.background {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "command "+id+" is not running in background")
		return
	}
	var from int64
	if v := r.URL.Query().Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			e.s.violation(w, "logs: bad cursor %q", v)
			return
		}
		from = n
	}
	b, err := os.ReadFile(e.outFile(id, ".output"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", err.Error())
		return
	}
	end := max(from, int64(len(b)))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("EXECD-COMMANDS-TAIL-CURSOR", strconv.FormatInt(end, 10))
	w.WriteHeader(http.StatusOK)
	if from < int64(len(b)) {
		_, _ = w.Write(b[from:])
	}
}
