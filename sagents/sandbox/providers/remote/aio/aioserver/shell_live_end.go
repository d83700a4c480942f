package aioserver

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// finish reads the status line after the marker: `<status> <PWD>` for a
// command that returned, `<status> exit`, the directory and export -p
// for one that ended the shell (the next command starts a new bash with
// that state).
func (s *liveShell) finish(p *shellProc, out *driver.BoundedBuffer, start time.Time) (*driver.CommandResult, error) {
	after := p.waitAfter(func(b string) bool { return strings.Contains(b, "\n") }, 5*time.Second)
	status, rest, _ := strings.Cut(after, "\n")
	codeText, tailText, _ := strings.Cut(status, " ")
	code, err := strconv.Atoi(codeText)
	if err != nil {
		code = -1
	}
	if tailText == "exit" {
		select { // the state follows until bash is gone
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.stop()
		}
		s.p = nil
		rest = p.afterText()
		_, rest, _ = strings.Cut(rest, "\n")
		dir, exports, _ := strings.Cut(rest, "\n")
		if strings.HasPrefix(dir, "/") {
			s.dir, s.exports = dir, strings.TrimRight(exports, "\n")
		}
	} else if strings.HasPrefix(tailText, "/") {
		s.dir = tailText
	}
	text, dropped := out.Text()
	return &driver.CommandResult{Stdout: text, StdoutDroppedBytes: dropped, Truncated: dropped > 0,
		ExitCode: code, Success: code == 0, Duration: time.Since(start)}, nil
}

// waitAfter waits (at most d) until what followed the marker satisfies
// ok, and returns it.
func (p *shellProc) waitAfter(ok func(string) bool, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		b := p.afterText()
		if ok(b) || time.Now().After(deadline) {
			return b
		}
		select {
		case <-p.done:
			return p.afterText()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (p *shellProc) afterText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.after)
}

// died handles a bash that ended without answering: not installed (exit
// 127 at once: the session falls back to replaying its state), or gone
// otherwise (the command's result is the shell's end).
func (s *liveShell) died(ctx context.Context, p *shellProc, out *driver.BoundedBuffer, start time.Time, command string, opts driver.ExecOptions) (*driver.CommandResult, error) {
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.stop()
		<-p.done
	}
	s.p = nil
	p.mu.Lock()
	res, err := p.res, p.err
	p.mu.Unlock()
	text, dropped := out.Text()
	if err == nil && res != nil && res.ExitCode == 127 && text == "" {
		s.replay = &replayShell{h: s.h, dir: s.dir}
		return s.replay.Exec(ctx, command, opts, true)
	}
	if err != nil {
		return nil, err
	}
	code := -1
	var sig string
	if res != nil {
		code, sig = res.ExitCode, res.Signal
	}
	return &driver.CommandResult{Stdout: text, StdoutDroppedBytes: dropped, ExitCode: code, Signal: sig,
		Duration: time.Since(start)}, nil
}

// kill ends the shell (the Handle's SIGTERM, then SIGKILL, to its process
// group) and waits for it; the next command starts a new one.
func (s *liveShell) kill(p *shellProc) {
	p.stop()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
	s.p = nil
}

func (s *liveShell) fallback() Shell {
	if s.replay == nil {
		s.replay = &replayShell{h: s.h, dir: s.dir, exports: s.exports}
	}
	return s.replay
}

// copyStdin copies src (the command's stdin, fed by /v1/shell/write) to
// the shell's stdin while the command runs; the returned stop ends it
// (nothing is written after stop returns).
func copyStdin(dst io.Writer, src io.Reader) (stop func()) {
	if src == nil {
		return func() {}
	}
	var mu sync.Mutex
	active := true
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			mu.Lock()
			if !active {
				mu.Unlock()
				return
			}
			if n > 0 {
				_, _ = dst.Write(buf[:n])
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return func() {
		mu.Lock()
		active = false
		mu.Unlock()
	}
}
