package sessiond

import (
	"context"
	"io"
	"net"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// exec runs a command (run: a shell command line or Python code),
// streaming its output to c as it comes; the command is cancelled when c
// closes (the client went away) or the server ends (ctx).
func (s *Server) exec(ctx context.Context, c *net.UnixConn, req Request,
	run func(context.Context, driver.ExecOptions) (*driver.CommandResult, error)) Response {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := driver.ExecOptions{Env: req.Env, Workdir: req.Workdir, Timeout: req.Timeout}
	var pw *io.PipeWriter
	if req.Stdin {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		defer pr.Close() // a stdin the command never read ends here
		opts.Stdin = pr
	}
	go readInput(c, pw, cancel)
	if req.Stream {
		w := &frameWriter{c: c, cancel: cancel}
		opts.OnStdout = func(p []byte) { w.write(kindStdout, p) }
		opts.OnStderr = func(p []byte) { w.write(kindStderr, p) }
	}
	res, err := run(ctx, opts)
	if err != nil {
		return s.failed(err)
	}
	d := res.Duration
	if req.Stream {
		r := *res
		r.Stdout, r.Stderr = "", ""
		res = &r
	}
	return Response{Result: res, Duration: d}
}

// readInput reads the client's frames for the rest of the connection:
// stdin into pw (nil: none expected); anything else, or the connection
// closing, cancels the command.
func readInput(c net.Conn, pw *io.PipeWriter, cancel context.CancelFunc) {
	for {
		f, err := readFrame(c)
		if err != nil {
			cancel()
			if pw != nil {
				pw.CloseWithError(err)
			}
			return
		}
		switch {
		case pw != nil && f.Kind == kindStdin:
			pw.Write(f.Payload) // fails once the command is done with stdin; keep reading
		case pw != nil && f.Kind == kindStdinEOF:
			pw.Close()
		default:
			cancel()
			if pw != nil {
				pw.CloseWithError(ErrProtocol)
			}
			return
		}
	}
}

// frameWriter writes output frames from the command's two streams; once
// a write fails (the client is gone) it cancels the command and drops
// the rest.
type frameWriter struct {
	mu     sync.Mutex
	c      net.Conn
	cancel context.CancelFunc
	broken bool
}

func (w *frameWriter) write(kind byte, p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return
	}
	if err := writeChunks(w.c, kind, p); err != nil {
		w.broken = true
		w.cancel()
	}
}
