package sessiond

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// maxWrite bounds the bytes one fs write sends through the socket: the
// daemon holds them in memory before it writes the file.
const maxWrite = hostkit.MaxReadFileBytes

// writeCap is maxWrite; a test lowers it.
var writeCap = maxWrite

// SlowStepAfter is how long a Python set-up step (the venv, pip) runs
// before `sage python` says on stderr what it is doing, with a session's
// daemon or without.
const SlowStepAfter = 300 * time.Millisecond

// python runs req.Code with req.Requirements installed first.
func (s *Server) python(ctx context.Context, c *net.UnixConn, req Request) Response {
	return s.exec(ctx, c, req, func(ctx context.Context, opts driver.ExecOptions) (*driver.CommandResult, error) {
		po := driver.PythonOptions{ExecOptions: opts, Requirements: req.Requirements}
		notice := opts.OnStderr
		if notice == nil {
			// Not streamed (--json): the notices still go to stderr, as
			// without a session; nothing else writes frames then.
			w := &frameWriter{c: c, cancel: func() {}}
			notice = func(p []byte) { w.write(kindStderr, p) }
		}
		po.OnSetup = SlowStepNotice(writerFunc(notice), SlowStepAfter)
		return s.Sandbox.ExecutePython(ctx, req.Code, po)
	})
}

// SlowStepNotice returns a driver.PythonOptions.OnSetup that prints
// "sage: STEP..." on w when a step is still running after the delay, and
// nothing for a quick one: what `sage python` says, with a session's
// daemon or without.
func SlowStepNotice(w io.Writer, after time.Duration) func(step string) (done func()) {
	return func(step string) func() {
		var mu sync.Mutex
		over := false
		t := time.AfterFunc(after, func() {
			mu.Lock()
			defer mu.Unlock()
			if !over {
				fmt.Fprintf(w, "sage: %s...\n", step)
			}
		})
		return func() {
			t.Stop()
			mu.Lock()
			over = true // a notice being written is done when this returns
			mu.Unlock()
		}
	}
}

// writerFunc is an io.Writer over a function that takes every write.
type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// fileOp runs one file operation of the sandbox: read streams the file
// as stdout frames, write takes it from stdin frames (maxWrite at most).
// Errors keep their *fs.PathError and kind (errorResponse).
func (s *Server) fileOp(ctx context.Context, c *net.UnixConn, req Request) Response {
	f := req.FS
	if f == nil {
		return errorResponse(fmt.Errorf("%w: fs request without an operation", ErrProtocol))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var pr *io.PipeReader
	var pw *io.PipeWriter
	if req.Stdin {
		pr, pw = io.Pipe()
		defer pr.Close()
	}
	go readInput(c, pw, cancel)
	var err error
	switch f.Op {
	case FSRead:
		var data []byte
		if data, err = s.Sandbox.ReadFile(ctx, f.Path); err == nil {
			if werr := writeChunks(c, kindStdout, data); werr != nil {
				return s.failed(werr)
			}
		}
	case FSWrite:
		if pr == nil {
			return errorResponse(fmt.Errorf("%w: fs write without stdin", ErrProtocol))
		}
		var data []byte
		data, err = io.ReadAll(io.LimitReader(pr, int64(writeCap)+1))
		switch {
		case err != nil:
			return s.failed(fmt.Errorf("fs write %s: the client's data did not arrive: %w", f.Path, err))
		case len(data) > writeCap:
			err = &fs.PathError{Op: "write", Path: f.Path, Err: fmt.Errorf("more than %d bytes (the cap of a write through a session): %w", writeCap, fs.ErrInvalid)}
		default:
			err = s.Sandbox.WriteFile(ctx, f.Path, data, driver.WriteOptions{Append: f.Append})
		}
	case FSList:
		var r FSResult
		if r.List, r.Truncated, err = s.Sandbox.ListDirectoryLimit(ctx, f.Path, f.MaxEntries); err == nil {
			return fsResponse(&r)
		}
	case FSTree:
		var r FSResult
		if r.Tree, err = s.Sandbox.FileTree(ctx, f.Path, f.Tree); err == nil {
			return fsResponse(&r)
		}
	case FSRm:
		err = s.Sandbox.DeleteFile(ctx, f.Path)
	default:
		return errorResponse(fmt.Errorf("%w: unknown fs operation %q", ErrProtocol, f.Op))
	}
	if err != nil {
		return s.failed(err)
	}
	return Response{}
}

// fsResponse answers r, or says it is too large for one response frame.
func fsResponse(r *FSResult) Response {
	b, err := json.Marshal(r)
	if err == nil && len(b) > maxResponse-4096 {
		err = fmt.Errorf("the answer (%d bytes) is over the %d bytes one answer of the session may carry; fix: a smaller --max-entries (or --depth, --max-items)", len(b), maxResponse-4096)
	}
	if err != nil {
		return errorResponse(err)
	}
	return Response{FS: r}
}

// traced starts the request's chain run on the Observer; end finishes it
// with the response. Without an Observer (or handlers) both are no-ops.
func (s *Server) traced(req Request) (context.Context, func(Response)) {
	name := "sage " + req.Op
	if req.Op == OpBackground {
		name = "sage exec --background"
	}
	if req.Op == OpFS && req.FS != nil {
		name = "sage fs " + req.FS.Op
	}
	if req.Op == OpTask && req.Task != nil {
		name = "sage task " + req.Task.Op
	}
	ctx := s.Observer.ChainStart(s.ctx, observability.ChainInfo{SessionID: s.Name, Name: name})
	return ctx, func(r Response) {
		if r.Error != "" && r.PathOp == "" {
			s.Observer.ChainError(ctx, responseError(r))
			return
		}
		s.Observer.ChainEnd(ctx, observability.ChainResult{})
	}
}

// MaxTaskRead bounds one read of a background task's log through the
// socket.
const MaxTaskRead = 1 << 20

// task runs one operation on a background task of the session's sandbox.
func (s *Server) task(ctx context.Context, req Request) Response {
	t := req.Task
	if t == nil || t.ID == "" {
		return errorResponse(fmt.Errorf("%w: task request without an operation or id", ErrProtocol))
	}
	switch t.Op {
	case TaskStatus:
		st, err := s.Sandbox.BackgroundStatus(ctx, t.ID)
		if err != nil {
			return s.failed(err)
		}
		return Response{TaskState: &st}
	case TaskOutput:
		out, err := s.Sandbox.ReadBackgroundOutput(ctx, t.ID, t.Offset, min(max(t.Max, 0), MaxTaskRead))
		if err != nil {
			return s.failed(err)
		}
		return Response{Output: &out}
	case TaskKill:
		if err := s.Sandbox.KillBackground(ctx, t.ID, t.Force); err != nil {
			return s.failed(err)
		}
		return Response{}
	}
	return errorResponse(fmt.Errorf("%w: unknown task operation %q", ErrProtocol, t.Op))
}
