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
	"time"
)

// driver is a Python loop that runs length-prefixed cells in one
// globals dict (so state lasts from cell to cell) and answers each with
// a length-prefixed JSON record of its output, error and, as Jupyter
// shows it, the repr of a last expression's value.
const driver = `import sys, io, json, traceback, contextlib, os, ast
g = {"__name__": "__main__"}
src, dst = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
while True:
    n = src.readline()
    if not n:
        break
    code = src.read(int(n)).decode()
    o, e, err, res = io.StringIO(), io.StringIO(), None, None
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            tree = ast.parse(code, "<cell>")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<cell>", "exec"), g)
            if last is not None:
                v = eval(compile(last, "<cell>", "eval"), g)
                if v is not None:
                    res = repr(v)
        except SystemExit as x:
            err = {"ename": "SystemExit", "evalue": "" if x.code is None else str(x.code), "traceback": ["An exception has occurred, use %tb to see the full traceback.\n", "\x1b[0;31mSystemExit\x1b[0m\x1b[0;31m:\x1b[0m " + str(x.code) + "\n"]}
        except BaseException as x:
            tb = traceback.format_exception(type(x), x, x.__traceback__)
            err = {"ename": type(x).__name__, "evalue": str(x), "traceback": tb[:-1] + ["\x1b[0;31m" + type(x).__name__ + "\x1b[0m: " + str(x)]}
    msg = json.dumps({"stdout": o.getvalue(), "stderr": e.getvalue(), "error": err, "result": res}).encode()
    dst.write(str(len(msg)).encode() + b"\n" + msg)
    dst.flush()
`

// pyContext is one Python interpreter.
type pyContext struct {
	id    string
	busy  sync.Mutex // one cell at a time
	count int        // execution count
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	dead  bool
}

func (c *pyContext) kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
}

type cellResult struct {
	Stdout string      `json:"stdout"`
	Stderr string      `json:"stderr"`
	Error  *eventError `json:"error"`
	Result *string     `json:"result"`
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
		if e.s.CodeContextHangs {
			<-r.Context().Done()
			writeError(w, http.StatusServiceUnavailable, "RUNTIME_ERROR", "no Jupyter server (the client left)")
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
	if c.dead {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "context "+c.id+" was interrupted")
		return
	}
	if !c.busy.TryLock() {
		// execd answers a second cell in a busy context inside the 200
		// stream it began.
		out := newSSE(w)
		defer out.end()
		out.send(event{Type: "init", Text: c.id})
		out.failLate("RUNTIME_ERROR", "error running codes session is busy")
		return
	}
	defer c.busy.Unlock()
	out := newSSE(w)
	defer out.end()
	out.send(event{Type: "init", Text: c.id})
	stop := make(chan struct{})
	defer close(stop)
	out.pinger(stop)
	start := time.Now()
	res, err := c.run(req.Code)
	if err != nil {
		c.dead = true
		out.failLate("RUNTIME_ERROR", "error running codes "+err.Error())
		return
	}
	c.count++
	took := max(time.Since(start).Milliseconds(), 1)
	streams := func() {
		if res.Stdout != "" {
			out.send(event{Type: "stdout", Text: res.Stdout})
		}
		if res.Stderr != "" {
			out.send(event{Type: "stderr", Text: res.Stderr})
		}
	}
	// The orders the recordings show (Jupyter's channels race; these are
	// the ones where the end comes before the output).
	switch {
	case res.Error != nil && res.Error.EName == "SystemExit":
		out.send(event{Type: "status", Text: "error"})
		out.send(event{Type: "error", Error: res.Error})
		streams()
		out.send(event{Type: "execution_complete", ExecutionTime: took})
	case res.Error != nil:
		streams()
		out.send(event{Type: "execution_complete", ExecutionTime: took})
		out.send(event{Type: "status", Text: "error"})
		out.send(event{Type: "error", Error: res.Error})
	default:
		out.send(event{Type: "execution_complete", ExecutionTime: took})
		streams()
		if res.Result != nil {
			out.send(event{Type: "execution_count", ExecutionCount: c.count})
			out.send(event{Type: "result", Results: map[string]any{"text": *res.Result}})
		}
	}
}
