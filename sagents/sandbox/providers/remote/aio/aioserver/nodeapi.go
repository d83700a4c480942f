package aioserver

import (
	"net/http"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox"
)

// nodejsExecuteRequest is POST /v1/nodejs/execute.
type nodejsExecuteRequest struct {
	Code      string            `json:"code"`
	Timeout   *int              `json:"timeout"`
	Stdin     *string           `json:"stdin"`
	Files     map[string]string `json:"files"`
	Stateful  *bool             `json:"stateful"`
	SessionID *string           `json:"session_id"`
	Cwd       *string           `json:"cwd"`
	Version   *string           `json:"version"`
}

type nodejsExecuteResult struct {
	Language       string           `json:"language"`
	Status         string           `json:"status"`
	ExecutionCount *int             `json:"execution_count"`
	Outputs        []map[string]any `json:"outputs"`
	Code           string           `json:"code"`
	Stdout         string           `json:"stdout"`
	Stderr         string           `json:"stderr"`
	ExitCode       int              `json:"exit_code"`
	SessionID      *string          `json:"session_id"`
}

// nodejsExecute is POST /v1/nodejs/execute. Stateless (the default), the
// code runs in a fresh `node -e` with stdin; stateful, in the session's
// node kernel (state kept per session_id, a new one when absent), where
// a final value is shown as an execute_result. node must be installed in
// the sandbox (501 otherwise). Not served: files (write them with
// /v1/file/write) and version (the sandbox's node runs).
func (s *Server) nodejsExecute(w http.ResponseWriter, r *http.Request) {
	var req nodejsExecuteRequest
	if !s.decode(w, r, &req, "code") {
		return
	}
	stateful := req.Stateful != nil && *req.Stateful
	switch {
	case len(req.Files) > 0:
		s.fail(w, badArg("files: sage sandboxd does not create files here; write them with /v1/file/write first"))
		return
	case stateful && deref(req.Stdin) != "":
		s.fail(w, badArg("stdin applies to stateless execution only (stateful: false)"))
		return
	}
	run, err := s.codeRunOf(r.Context(), req.Timeout, req.Cwd)
	if err != nil {
		s.fail(w, err)
		return
	}
	if !stateful {
		s.nodeOnce(w, r, req, run)
		return
	}
	a, id, err := s.execCode(r.Context(), run, langJS, deref(req.SessionID), false, req.Code)
	if err != nil {
		s.fail(w, err)
		return
	}
	ok(w, nodejsExecuteResult{Language: langJS, Status: a.Status, Outputs: outputs(a), Code: req.Code,
		Stdout: a.Stdout, Stderr: a.Stderr, SessionID: &id, ExitCode: exitOf(a), ExecutionCount: countOf(a)})
}

// nodeOnce runs the code in a fresh node process.
func (s *Server) nodeOnce(w http.ResponseWriter, r *http.Request, req nodejsExecuteRequest, run codeRun) {
	opts := sandbox.ExecOptions{Workdir: run.dir, Timeout: run.timeout, OutputLimit: 2 * kernelOutput}
	if req.Stdin != nil {
		opts.Stdin = strings.NewReader(*req.Stdin)
	}
	res, err := s.h.ExecuteCommand(r.Context(), "exec node -e "+shQuote(req.Code), opts)
	if err != nil {
		s.fail(w, err)
		return
	}
	if res.ExitCode == 127 && !res.TimedOut {
		envelopeError(w, http.StatusNotImplemented, "node is not installed in the sandbox: "+strings.TrimSpace(res.Stderr), nil, "")
		return
	}
	out := nodejsExecuteResult{Language: langJS, Status: "ok", Code: req.Code, Stdout: res.Stdout, Stderr: res.Stderr,
		ExitCode: exitCode(res), Outputs: outputs(&kernelAnswer{Stdout: res.Stdout, Stderr: res.Stderr})}
	switch {
	case res.TimedOut:
		out.Status = "timeout"
	case res.ExitCode != 0:
		out.Status = "error"
	}
	ok(w, out)
}
