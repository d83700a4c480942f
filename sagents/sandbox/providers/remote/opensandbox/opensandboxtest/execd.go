package opensandboxtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// Execd is the fake execd of one sandbox.
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
	id      string
	content string
	proc    *os.Process
	log     string // background commands: their output file
	done    chan struct{}
	exit    int
	started time.Time
	ended   time.Time
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

// sse writes events one "data:" block each, flushed at once.
type sse struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

func (s *sse) send(ev map[string]any) {
	ev["timestamp"] = time.Now().UnixMilli()
	b, _ := json.Marshal(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// streamWriter turns writes into stdout or stderr events of at most
// 32 KiB.
type streamWriter struct {
	s    *sse
	kind string
}

func (w streamWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		n := min(len(rest), 32<<10)
		w.s.send(map[string]any{"type": w.kind, "text": string(rest[:n])})
		rest = rest[n:]
	}
	return len(p), nil
}

type runCommandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd"`
	Background bool              `json:"background"`
	Timeout    int64             `json:"timeout"`
	Envs       map[string]string `json:"envs"`
}

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
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		writeError(w, http.StatusBadRequest, "INVALID_CWD", "cwd "+cwd+" is not a directory")
		return
	}
	cmd := exec.Command("/bin/sh", "-c", req.Command)
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + e.Workspace(), "LANG=C.UTF-8"}
	for k, v := range e.sb.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range req.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 300 * time.Millisecond
	c := &command{content: req.Command, done: make(chan struct{}), started: time.Now()}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		writeError(w, http.StatusServiceUnavailable, "CLOSED", "execd is shutting down")
		return
	}
	e.seq++
	c.id = "cmd-" + strconv.Itoa(e.seq)
	if req.Background {
		c.log = filepath.Join(e.sb.Dir, c.id+".log")
		f, err := os.Create(c.log)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
			return
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	out := newSSE(w)
	out.send(map[string]any{"type": "init", "text": c.id})
	if !req.Background {
		cmd.Stdout, cmd.Stderr = streamWriter{out, "stdout"}, streamWriter{out, "stderr"}
	}
	if err := cmd.Start(); err != nil {
		out.send(map[string]any{"type": "error", "error": map[string]any{"ename": "StartError", "evalue": err.Error()}})
		return
	}
	c.proc = cmd.Process
	e.cmds[c.id] = c
	var timer *time.Timer
	if req.Timeout > 0 {
		timer = time.AfterFunc(time.Duration(req.Timeout)*time.Millisecond, func() { _ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL) })
	}
	go func() {
		err := cmd.Wait()
		if timer != nil {
			timer.Stop()
		}
		c.exit = exitCode(cmd, err)
		c.ended = time.Now()
		close(c.done)
	}()
	if req.Background {
		return
	}
	e.mu.Unlock()
	defer e.mu.Lock() // for the deferred Unlock
	select {
	case <-r.Context().Done():
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
		<-c.done
		return
	case <-c.done:
	}
	if c.exit != 0 {
		out.send(map[string]any{"type": "error", "error": map[string]any{"ename": "CommandExecError",
			"evalue": strconv.Itoa(c.exit), "traceback": []string{"exit status " + strconv.Itoa(c.exit)}}})
	}
	out.send(map[string]any{"type": "execution_complete", "execution_time": c.ended.Sub(c.started).Milliseconds()})
}

// exitCode is the shell's exit code, 128+n for a signal.
func exitCode(cmd *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && cmd.ProcessState == nil {
		return 127
	}
	ps := cmd.ProcessState
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func (e *Execd) lookup(w http.ResponseWriter, id string) *command {
	return find(e, w, e.cmds, "command", id)
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
// two seconds later if it still runs.
func (e *Execd) interrupt(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		e.s.violation(w, "interrupt: id is required")
		return
	}
	c := e.lookup(w, id)
	if c == nil {
		return
	}
	_ = syscall.Kill(-c.proc.Pid, syscall.SIGTERM)
	go func() {
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
		}
	}()
	w.WriteHeader(http.StatusOK)
}

func (e *Execd) status(w http.ResponseWriter, id string) {
	c := e.lookup(w, id)
	if c == nil {
		return
	}
	// While it runs, exit_code and finished_at are left out (the
	// document is OpenAPI 3.1, where "nullable" does not allow null).
	v := map[string]any{"id": c.id, "content": c.content, "running": true,
		"started_at": c.started.UTC().Format(time.RFC3339)}
	select {
	case <-c.done:
		v["running"], v["exit_code"], v["finished_at"] = false, c.exit, c.ended.UTC().Format(time.RFC3339)
	default:
	}
	writeJSON(w, http.StatusOK, v)
}

// logs answers the lines after cursor (all without one) and the index of
// the last line in EXECD-COMMANDS-TAIL-CURSOR.
func (e *Execd) logs(w http.ResponseWriter, r *http.Request, id string) {
	c := e.lookup(w, id)
	if c == nil {
		return
	}
	if c.log == "" {
		writeError(w, http.StatusBadRequest, "NOT_BACKGROUND", "command "+id+" ran in the foreground")
		return
	}
	b, err := os.ReadFile(c.log)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
		return
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	from := 0
	if v := r.URL.Query().Get("cursor"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			e.s.violation(w, "logs: bad cursor %q", v)
			return
		}
		from = min(n+1, len(lines))
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("EXECD-COMMANDS-TAIL-CURSOR", strconv.Itoa(len(lines)-1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(bytes.Join(lines[from:], nil))
}
