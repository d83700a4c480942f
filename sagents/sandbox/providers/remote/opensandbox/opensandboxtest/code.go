package opensandboxtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// driver is a Python loop that runs length-prefixed cells in one
// globals dict (so state lasts from cell to cell) and answers each with
// a length-prefixed JSON record of its output and error.
const driver = `import sys, io, json, traceback, contextlib, os
g = {"__name__": "__main__"}
src, dst = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
while True:
    n = src.readline()
    if not n:
        break
    code = src.read(int(n)).decode()
    o, e, err = io.StringIO(), io.StringIO(), None
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            exec(compile(code, "<cell>", "exec"), g)
        except SystemExit as x:
            err = {"ename": "SystemExit", "evalue": str(0 if x.code is None else x.code), "traceback": []}
        except BaseException as x:
            err = {"ename": type(x).__name__, "evalue": str(x), "traceback": traceback.format_exception(type(x), x, x.__traceback__)}
    msg = json.dumps({"stdout": o.getvalue(), "stderr": e.getvalue(), "error": err}).encode()
    dst.write(str(len(msg)).encode() + b"\n" + msg)
    dst.flush()
`

// pyContext is one Python interpreter.
type pyContext struct {
	id   string
	mu   sync.Mutex // one cell at a time
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	dead bool
}

func (c *pyContext) kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
}

type cellResult struct {
	Stdout string          `json:"stdout"`
	Stderr string          `json:"stderr"`
	Error  json.RawMessage `json:"error"`
}

func (c *pyContext) run(code string) (*cellResult, error) {
	if _, err := fmt.Fprintf(c.in, "%d\n%s", len(code), code); err != nil {
		return nil, err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.out, b); err != nil {
		return nil, err
	}
	var r cellResult
	return &r, json.Unmarshal(b, &r)
}

func (e *Execd) code(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/code/context" && r.Method == http.MethodPost:
		var req struct {
			Language string `json:"language"`
		}
		if err := decodeStrict(r, &req); err != nil {
			e.s.violation(w, "%v", err)
			return
		}
		if req.Language != "python" {
			writeError(w, http.StatusBadRequest, "UNSUPPORTED_LANGUAGE", "only python here, not "+req.Language)
			return
		}
		cmd := exec.Command("python3", "-u", "-c", driver)
		cmd.Dir = e.Workspace()
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:" + pythonPath(), "HOME=" + e.Workspace()}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", err.Error())
			return
		}
		go func() { _ = cmd.Wait() }()
		e.mu.Lock()
		e.seq++
		c := &pyContext{id: "ctx-" + strconv.Itoa(e.seq), cmd: cmd, in: in, out: bufio.NewReader(out)}
		e.contexts[c.id] = c
		closed := e.closed
		e.mu.Unlock()
		if closed {
			c.kill()
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": c.id, "language": "python"})
	case p == "/code" && r.Method == http.MethodPost:
		e.runCode(w, r)
	case p == "/code" && r.Method == http.MethodDelete:
		c := e.context(w, r.URL.Query().Get("id"))
		if c != nil {
			c.kill()
			w.WriteHeader(http.StatusOK)
		}
	case strings.HasPrefix(p, "/code/contexts/") && r.Method == http.MethodDelete:
		c := e.context(w, strings.TrimPrefix(p, "/code/contexts/"))
		if c != nil {
			c.kill()
			e.mu.Lock()
			delete(e.contexts, c.id)
			e.mu.Unlock()
			w.WriteHeader(http.StatusOK)
		}
	default:
		e.s.violation(w, "execd %s %s: no such operation", r.Method, p)
	}
}

// pythonPath is the directory of this host's python3, for PATH.
func pythonPath() string {
	p, err := exec.LookPath("python3")
	if err != nil {
		return ""
	}
	return p[:strings.LastIndexByte(p, '/')]
}

func (e *Execd) context(w http.ResponseWriter, id string) *pyContext {
	return find(e, w, e.contexts, "context", id)
}

func (e *Execd) runCode(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Context *struct {
			ID       string `json:"id"`
			Language string `json:"language"`
		} `json:"context"`
		Code string `json:"code"`
	}
	if err := decodeStrict(r, &req); err != nil || req.Code == "" || req.Context == nil || req.Context.Language == "" {
		e.s.violation(w, "run code: context with language and code are required (%v)", err)
		return
	}
	c := e.context(w, req.Context.ID)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "context "+c.id+" was interrupted")
		return
	}
	out := newSSE(w)
	res, err := c.run(req.Code)
	if err != nil {
		c.dead = true
		out.send(map[string]any{"type": "error", "error": map[string]any{"ename": "KernelDied", "evalue": err.Error()}})
		return
	}
	if res.Stdout != "" {
		streamWriter{out, "stdout"}.Write([]byte(res.Stdout))
	}
	if res.Stderr != "" {
		streamWriter{out, "stderr"}.Write([]byte(res.Stderr))
	}
	if len(res.Error) > 0 && string(res.Error) != "null" {
		var ev map[string]any
		_ = json.Unmarshal(res.Error, &ev)
		out.send(map[string]any{"type": "error", "error": ev})
	}
	out.send(map[string]any{"type": "execution_complete", "execution_time": 1})
}
