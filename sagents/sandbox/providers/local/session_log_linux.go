//go:build linux

package local

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// maxSessionLog bounds what one session sandbox writes to session.log
// (bwrap's and the supervisor's messages, a few lines); the rest is
// dropped.
const maxSessionLog = 1 << 20

// sessionLog carries what a session sandbox's bwrap (or runsc) and its
// supervisor write on stdout and stderr to session.log. They get the
// write end of a pipe this process reads, not the file: no descriptor of
// a process inside the sandbox is a host file, so a command that got one
// (a process it should not reach) could not append to session.log or
// any other host file through it.
type sessionLog struct {
	f      *os.File // session.log
	off    int64    // where this session sandbox's output starts in it
	r, w   *os.File // the pipe; w is the sandbox's stdout and stderr
	copied chan struct{}
}

func openSessionLog(path string) (*sessionLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local: session log: %w", err)
	}
	l := &sessionLog{f: f, copied: make(chan struct{})}
	l.off, _ = f.Seek(0, io.SeekEnd)
	if !sessionLogPipe { // a red-team control only: the file itself, as before
		l.w = f
		close(l.copied)
		return l, nil
	}
	if l.r, l.w, err = os.Pipe(); err != nil {
		f.Close()
		return nil, fmt.Errorf("local: session log: %w", err)
	}
	return l, nil
}

// start copies the pipe to the file until every writer closed it. The
// caller closes w (its own copy) once the sandbox started.
func (l *sessionLog) start() {
	if l.r == nil { // the caller's close of w closes the file
		return
	}
	go func() {
		defer close(l.copied)
		defer l.f.Close()
		defer l.r.Close()
		// A small buffer: each session sandbox has one for its life, and
		// it writes a few lines.
		buf := make([]byte, 1024)
		written := 0
		for {
			n, err := l.r.Read(buf)
			if n > 0 && written < maxSessionLog {
				n = min(n, maxSessionLog-written)
				l.f.Write(buf[:n])
				if written += n; written == maxSessionLog {
					fmt.Fprintf(l.f, "\nsage: this session sandbox wrote more than %d bytes; the rest is dropped\n", maxSessionLog)
				}
			} // past the limit: read and dropped, a writer must never block on a full pipe
			if err != nil {
				return
			}
		}
	}()
}

// abandon releases what openSessionLog made, for a sandbox that did not
// start.
func (l *sessionLog) abandon() {
	if l.r != nil {
		l.r.Close()
		l.f.Close()
		close(l.copied)
	}
}

// tail is the last line the session sandbox wrote, as ` ("...")`, or ""
// when it wrote none: read once the copy is done (the sandbox ended), or
// after a second.
func (l *sessionLog) tail() string {
	select {
	case <-l.copied:
	case <-time.After(time.Second):
	}
	f, err := os.Open(l.f.Name())
	if err != nil {
		return ""
	}
	defer f.Close()
	from := l.off
	if fi, err := f.Stat(); err == nil && fi.Size()-from > 1<<16 {
		from = fi.Size() - 1<<16
	}
	b, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(f, from, 1<<16), 1<<16))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		return fmt.Sprintf(" (%q)", last)
	}
	return ""
}
