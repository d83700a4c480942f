package sessiond

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// dial connects to the session's socket; the daemon must run as this
// user or root. No daemon listening is ErrNotRunning.
func dial(dir string) (*net.UnixConn, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: filepath.Join(dir, sockName), Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("%w: %v", ErrNotRunning, err)
		}
		return nil, err
	}
	uid, err := peerUID(c)
	if err != nil || !admit(uid) {
		c.Close()
		return nil, fmt.Errorf("%w: the daemon at %s runs as uid %d, not as uid %d or root", ErrRefused, dir, uid, os.Geteuid())
	}
	return c, nil
}

// Streams are a command's stdin (nil: none), stdout and stderr.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Call sends req to the daemon of dir and returns its response. With
// req.Stream, the command's output goes to st as it comes; with
// req.Stdin, st.Stdin is sent as the command's stdin. Ending ctx closes
// the connection, which cancels the command. A failure the daemon
// reports is an *Error, or an *fs.PathError whose Err is one.
func Call(ctx context.Context, dir string, req Request, st Streams) (Response, error) {
	c, err := dial(dir)
	if err != nil {
		return Response{}, err
	}
	defer c.Close()
	req.Key = readKey(dir)
	return exchange(ctx, c, req, st)
}

// exchange runs one request on c. It returns errNoAnswer when the
// connection ended before any answer came.
func exchange(ctx context.Context, c *net.UnixConn, req Request, st Streams) (Response, error) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if req.V == 0 {
		req.V = protocolVersion
	}
	if err := writeJSON(c, kindRequest, req); err != nil {
		if errors.Is(err, errFrame) {
			// Refused here, before a byte was sent: the daemon waits for a
			// request that will not come, so do not wait for its answer.
			return Response{}, fmt.Errorf("%w: %v", ErrTooLarge, err)
		}
		// The daemon may have answered already (a refusal).
		if f, rerr := readFrame(c); rerr == nil && f.Kind == kindResponse {
			var r Response
			if json.Unmarshal(f.Payload, &r) == nil && r.Error != "" {
				return r, responseError(r)
			}
		}
		return Response{}, ctxErr(ctx, fmt.Errorf("%w: %v", errNoAnswer, err))
	}
	if req.Stdin {
		go sendStdin(c, st.Stdin)
	}
	answered := false
	for {
		f, err := readFrame(c)
		if err != nil {
			switch {
			case !answered && errors.Is(err, syscall.ECONNRESET):
				err = fmt.Errorf("%w: %v", errNoAnswer, err) // never accepted
			case !answered:
				err = fmt.Errorf("the session's daemon ended without an answer (did it crash? see its log): %w", err)
			}
			return Response{}, ctxErr(ctx, err)
		}
		answered = true
		switch f.Kind {
		case kindStdout:
			if st.Stdout != nil {
				st.Stdout.Write(f.Payload)
			}
		case kindStderr:
			if st.Stderr != nil {
				st.Stderr.Write(f.Payload)
			}
		case kindResponse:
			var r Response
			if err := json.Unmarshal(f.Payload, &r); err != nil {
				return Response{}, err
			}
			if r.Error != "" {
				return r, responseError(r)
			}
			return r, nil
		default:
			return Response{}, fmt.Errorf("%w: unexpected frame %q from the daemon", ErrProtocol, f.Kind)
		}
	}
}

// errNoAnswer: the connection was reset before the daemon read the
// request (it was ending and never accepted it): the request may be
// sent again to a new daemon.
var errNoAnswer = errors.New("the session's daemon closed the connection without an answer")

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func sendStdin(c net.Conn, r io.Reader) {
	if r != nil {
		buf := make([]byte, maxChunk)
		for {
			n, err := r.Read(buf)
			if n > 0 && writeFrame(c, kindStdin, buf[:n]) != nil {
				return
			}
			if err != nil {
				break
			}
		}
	}
	writeFrame(c, kindStdinEOF, nil)
}

// Stop ends the session's daemon and waits until it has cleaned up: the
// sandbox closed (every process of the session killed), socket, info and
// lock removed. The workspace is kept. A session whose daemon is not
// running is ErrNotRunning (and what a dead one left is removed).
func Stop(ctx context.Context, dir string) error {
	c, err := dial(dir)
	if errors.Is(err, ErrNotRunning) {
		if l, lerr := lock(ctx, dir); lerr == nil {
			if rec, ok, _ := readRecord(dir); !ok || !rec.alive() {
				removeLeftovers(dir)
				unlock(l, true)
			} else {
				unlock(l, false)
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := exchange(ctx, c, Request{V: stableVersion, Op: OpStop, Key: readKey(dir)}, Streams{}); err != nil {
		return err
	}
	// The daemon closes the connection once it has cleaned up.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_, err = io.Copy(io.Discard, io.LimitReader(c, 1))
	return ctxErr(ctx, err)
}

// Describe asks the session's daemon about itself.
func Describe(ctx context.Context, dir string) (*Info, error) {
	r, err := Call(ctx, dir, Request{V: stableVersion, Op: OpInfo}, Streams{})
	if err != nil {
		return nil, err
	}
	if r.Info == nil {
		return nil, fmt.Errorf("%w: no info in the answer", ErrProtocol)
	}
	return r.Info, nil
}
