package aioserver

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
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
// a final value is shown as an execute_result. files are created in the
// execution directory first: cwd when given (where they stay), else, for
// a stateless run, a fresh directory of its own under the workspace's
// .sage/, removed afterwards ("each request creates a fresh execution
// environment ... cleaned up automatically"); a stateful run without cwd
// gets them in the workspace. node must be installed in the sandbox (501
// otherwise). Not served: version (the sandbox's node runs).
func (s *Server) nodejsExecute(w http.ResponseWriter, r *http.Request) {
	var req nodejsExecuteRequest
	if !s.decode(w, r, &req, "code") {
		return
	}
	stateful := req.Stateful != nil && *req.Stateful
	if stateful && deref(req.Stdin) != "" {
		s.fail(w, badArg("stdin applies to stateless execution only (stateful: false)"))
		return
	}
	if err := checkNodeFiles(req.Files); err != nil {
		s.fail(w, err)
		return
	}
	run, err := s.codeRunOf(r.Context(), req.Timeout, req.Cwd)
	if err != nil {
		s.fail(w, err)
		return
	}
	if len(req.Files) > 0 {
		dir := run.dir
		if dir == "" && !stateful {
			dir = path.Join(s.h.WorkspacePath(), ".sage", driver.NewID("nodejs"))
			defer s.removeDir(context.WithoutCancel(r.Context()), dir)
			run.dir = dir
		}
		if dir == "" {
			dir = s.h.WorkspacePath()
		}
		if err := s.writeFiles(r.Context(), dir, req.Files); err != nil {
			s.fail(w, err)
			return
		}
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

// maxNodeFiles bounds the files of one execute request (their size is
// bounded by the request body's).
const maxNodeFiles = 256

// checkNodeFiles refuses file names that are not clean relative paths
// (they are created under the execution directory, never elsewhere).
func checkNodeFiles(files map[string]string) error {
	if len(files) > maxNodeFiles {
		return badArg(fmt.Sprintf("files: %d files, more than the %d one request creates", len(files), maxNodeFiles))
	}
	for name := range files {
		if !fs.ValidPath(name) || name == "." || strings.ContainsAny(name, "\\\x00") {
			return badArg(fmt.Sprintf("files: %q is not a relative path inside the execution directory", name))
		}
	}
	return nil
}

// writeFiles creates files (checked by checkNodeFiles) under dir.
func (s *Server) writeFiles(ctx context.Context, dir string, files map[string]string) error {
	for name, content := range files {
		p := path.Join(dir, name)
		if err := s.h.EnsureDirectory(ctx, path.Dir(p)); err != nil {
			return err
		}
		if err := s.h.WriteFile(ctx, p, []byte(content), driver.WriteOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// removeDir removes a directory the server made for one execution.
func (s *Server) removeDir(ctx context.Context, dir string) {
	res, err := s.h.ExecuteCommand(ctx, "rm -rf -- "+shQuote(dir), driver.ExecOptions{Timeout: 30 * time.Second})
	if err != nil || !res.Success {
		s.opts.Logger.Warn("aioserver: remove an execution directory", "dir", dir, "error", err)
	}
}

// nodeOnce runs the code in a fresh node process.
func (s *Server) nodeOnce(w http.ResponseWriter, r *http.Request, req nodejsExecuteRequest, run codeRun) {
	opts := driver.ExecOptions{Workdir: run.dir, Timeout: run.timeout, OutputLimit: 2 * kernelOutput}
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
