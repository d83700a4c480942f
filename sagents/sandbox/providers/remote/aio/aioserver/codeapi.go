package aioserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// codeExecuteRequest is POST /v1/code/execute.
type codeExecuteRequest struct {
	Language  string  `json:"language"`
	Code      string  `json:"code"`
	Timeout   *int    `json:"timeout"`
	Cwd       *string `json:"cwd"`
	Stateful  bool    `json:"stateful"`
	SessionID *string `json:"session_id"`
}

type codeExecuteResult struct {
	Language  string           `json:"language"`
	Status    string           `json:"status"`
	Outputs   []map[string]any `json:"outputs"`
	Code      string           `json:"code"`
	Stdout    string           `json:"stdout"`
	Stderr    string           `json:"stderr"`
	ExitCode  *int             `json:"exit_code"`
	Traceback []string         `json:"traceback"`
	SessionID *string          `json:"session_id"`
}

// jupyterExecuteRequest is POST /v1/jupyter/execute.
type jupyterExecuteRequest struct {
	Code       string  `json:"code"`
	Timeout    *int    `json:"timeout"`
	KernelName *string `json:"kernel_name"`
	SessionID  *string `json:"session_id"`
	Cwd        *string `json:"cwd"`
}

type jupyterExecuteResult struct {
	KernelName     string           `json:"kernel_name"`
	SessionID      string           `json:"session_id"`
	Status         string           `json:"status"`
	ExecutionCount *int             `json:"execution_count"`
	Outputs        []map[string]any `json:"outputs"`
	Code           string           `json:"code"`
	MsgID          string           `json:"msg_id"`
}

// codeRun is where and for how long a code request runs, from its
// timeout and cwd.
type codeRun struct {
	dir     string
	timeout time.Duration
}

// codeRunOf checks a request's timeout (seconds, 1 to 300 as the spec
// says; default 30), refusing others in FastAPI's shape, and resolves its
// cwd (relative to the workspace), checked as exec checks exec_dir.
func (s *Server) codeRunOf(ctx context.Context, timeout *int, cwd *string) (codeRun, error) {
	run := codeRun{timeout: 30 * time.Second}
	switch {
	case timeout == nil:
	case *timeout < 1:
		return run, invalid([]any{"body", "timeout"}, "greater_than_equal", "Input should be greater than or equal to 1")
	case *timeout > 300:
		return run, invalid([]any{"body", "timeout"}, "less_than_equal", "Input should be less than or equal to 300")
	default:
		run.timeout = time.Duration(*timeout) * time.Second
	}
	if cwd == nil || *cwd == "" {
		return run, nil
	}
	run.dir = *cwd
	if !path.IsAbs(run.dir) {
		run.dir = path.Join(s.h.WorkspacePath(), run.dir)
	}
	return run, s.sessions.checkDir(ctx, run.dir)
}

// execCode runs code in the session's kernel (a new session id when id is
// empty; with stateless, a kernel of its own closed afterwards). A
// timeout stops the kernel; it and a kernel that died are answers
// (answerOf), not errors.
func (s *Server) execCode(ctx context.Context, run codeRun, lang, id string, stateless bool, code string) (*kernelAnswer, string, error) {
	var k *kernel
	var err error
	dir := run.dir
	if stateless {
		k, err = startKernel(s.h, lang, kernelCommand(lang), dir, false)
		if err == nil {
			defer k.close()
		}
	} else {
		if id == "" {
			id = driver.NewID("code")
		}
		var fresh bool
		k, fresh, err = s.kernels.get(lang, id, dir)
		if fresh {
			dir = "" // it starts there
		}
	}
	if err != nil {
		a, err := answerOf(nil, err, run.timeout)
		return a, id, err
	}
	a, err := k.run(ctx, code, dir, run.timeout)
	if !stateless && (errors.Is(err, errKernelTimeout) || (err != nil && !k.alive())) {
		s.kernels.drop(lang, id, k)
	}
	a, err = answerOf(a, err, run.timeout)
	return a, id, err
}

// exitOf is the exit code an answer stands for: 0 when it is ok, else 1.
func exitOf(a *kernelAnswer) int {
	if a.Status != "ok" {
		return 1
	}
	return 0
}

// countOf is an answer's execution count, nil when the kernel gave none.
func countOf(a *kernelAnswer) *int {
	if a.ExecutionCount > 0 {
		return &a.ExecutionCount
	}
	return nil
}

// outputs are an answer as Jupyter output records.
func outputs(a *kernelAnswer) []map[string]any {
	out := []map[string]any{}
	if a.Stdout != "" {
		out = append(out, map[string]any{"output_type": "stream", "name": "stdout", "text": a.Stdout})
	}
	if a.Stderr != "" {
		out = append(out, map[string]any{"output_type": "stream", "name": "stderr", "text": a.Stderr})
	}
	if a.Result != nil {
		out = append(out, map[string]any{"output_type": "execute_result", "data": map[string]any{"text/plain": *a.Result},
			"metadata": map[string]any{}, "execution_count": a.ExecutionCount})
	}
	if a.Status == "error" {
		out = append(out, map[string]any{"output_type": "error", "ename": a.Ename, "evalue": a.Evalue, "traceback": a.Traceback})
	}
	return out
}

// answerOf turns a kernel error that is not the server's into an error
// answer (timeout, the interpreter died); others are returned.
func answerOf(a *kernelAnswer, err error, timeout time.Duration) (*kernelAnswer, error) {
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, errKernelTimeout):
		return &kernelAnswer{Status: "timeout", Ename: "TimeoutError", Evalue: fmt.Sprintf(
			"execution did not finish within %v; the session's kernel was stopped and its state is lost", timeout)}, nil
	case errors.Is(err, driver.ErrUnsupported), errors.Is(err, context.Canceled), errors.Is(err, driver.ErrClosed):
		return nil, err
	}
	return &kernelAnswer{Status: "error", Ename: "KernelDied", Evalue: err.Error()}, nil
}

// codeExecute is POST /v1/code/execute: python or javascript, in the
// session's kernel with stateful (state kept per session_id), else in a
// fresh interpreter.
func (s *Server) codeExecute(w http.ResponseWriter, r *http.Request) {
	var req codeExecuteRequest
	if !s.decode(w, r, &req, "language", "code") {
		return
	}
	if req.Language != langPython && req.Language != langJS {
		s.fail(w, invalid([]any{"body", "language"}, "enum", "Input should be 'python' or 'javascript'"))
		return
	}
	run, err := s.codeRunOf(r.Context(), req.Timeout, req.Cwd)
	if err != nil {
		s.fail(w, err)
		return
	}
	a, id, err := s.execCode(r.Context(), run, req.Language, deref(req.SessionID), !req.Stateful, req.Code)
	if err != nil {
		s.fail(w, err)
		return
	}
	code := exitOf(a)
	out := codeExecuteResult{Language: req.Language, Status: a.Status, Outputs: outputs(a), Code: req.Code,
		Stdout: a.Stdout, Stderr: a.Stderr, Traceback: a.Traceback, ExitCode: &code}
	if req.Stateful {
		out.SessionID = &id
	}
	ok(w, out)
}

// jupyterExecute is POST /v1/jupyter/execute: Python in the session's
// kernel, state kept per session_id (a new one when absent).
func (s *Server) jupyterExecute(w http.ResponseWriter, r *http.Request) {
	var req jupyterExecuteRequest
	if !s.decode(w, r, &req, "code") {
		return
	}
	if kn := deref(req.KernelName); kn != "" && !strings.HasPrefix(kn, "python3") {
		s.fail(w, badArg("kernel_name "+kn+": sage sandboxd runs python3 kernels only"))
		return
	}
	run, err := s.codeRunOf(r.Context(), req.Timeout, req.Cwd)
	if err != nil {
		s.fail(w, err)
		return
	}
	a, id, err := s.execCode(r.Context(), run, langPython, deref(req.SessionID), false, req.Code)
	if err != nil {
		s.fail(w, err)
		return
	}
	ok(w, jupyterExecuteResult{KernelName: "python3", SessionID: id, Status: a.Status, Outputs: outputs(a),
		Code: req.Code, MsgID: driver.NewID("msg"), ExecutionCount: countOf(a)})
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
