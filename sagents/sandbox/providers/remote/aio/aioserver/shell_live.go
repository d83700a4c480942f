package aioserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// liveShell is a session's shell as AIO has it: one bash process that
// lives as long as the session, run through the Handle like any command
// and fed over its stdin. Each command goes in as one line,
// `__sage_run $'<command>' <marker>`: bash reads the whole line before
// running it, so what the command reads from stdin is what
// /v1/shell/write sends, never the protocol. The function evals the
// command in the shell itself (cd, variables, functions, aliases,
// background jobs last) and then prints the marker and the exit status;
// the output before the marker is the command's (stdout and stderr in
// one pipe). A command that ends the shell (exit) runs the EXIT trap,
// which prints the marker, the status and the state (working directory,
// export -p); the next command starts a new bash with that state, as the
// replay shell would. A command killed by its timeout or by a kill ends
// the shell too: the next starts in the last known directory.
//
// Without bash in the sandbox, or on a sandbox whose commands cannot read
// a stdin that stays open (a remote one), the session replays its state
// instead (replayShell).
type liveShell struct {
	h  *sandbox.Sandbox
	mu sync.Mutex // one command at a time
	// dir is where the next bash starts; state restores exports.
	dir, exports string
	p            *shellProc
	replay       *replayShell // set once bash cannot run
}

// NewLiveShell is the default ShellFactory: a long-lived bash per session
// (liveShell), falling back to state replay where it cannot run.
func NewLiveShell(_ context.Context, h *sandbox.Sandbox, dir string) (Shell, error) {
	if h.Type() == driver.Remote {
		return &replayShell{h: h, dir: dir}, nil
	}
	return &liveShell{h: h, dir: dir}, nil
}

// shellProc is one running bash of a liveShell.
type shellProc struct {
	stdin  *os.File
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	marker []byte
	sink   func([]byte) // the current command's output
	held   []byte       // output that may be the start of the marker
	after  []byte       // what follows the marker
	ended  chan struct{}
	res    *driver.CommandResult
	err    error
}

const shellPreamble = `exec 2>&1
__sage_run() { __sage_m=$2; eval "$1"; __sage_rc=$?; printf '%s %d %s\n' "$__sage_m" "$__sage_rc" "$PWD"; }
trap '__sage_rc=$?; printf "%s %d exit\n%s\n" "$__sage_m" "$__sage_rc" "$PWD"; export -p' EXIT
`

func (s *liveShell) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replay != nil {
		return s.replay.Dir()
	}
	return s.dir
}

func (s *liveShell) Close(context.Context) error {
	s.mu.Lock()
	p := s.p
	s.p = nil
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
	return nil
}

// StopIdle ends the shell's bash when no command runs in it, and waits
// for its end (or ctx): a checkpoint or rollback of the workspace wants
// the session quiet, and a bash whose directory is in the workspace
// would keep the old mount. The next command starts a new bash in the
// same directory, as after an exec_dir change.
func (s *liveShell) StopIdle(ctx context.Context) {
	if !s.mu.TryLock() {
		return // a command runs: the checkpoint says so
	}
	defer s.mu.Unlock()
	p := s.p
	s.p = nil
	if p == nil {
		return
	}
	p.stop()
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}

func (p *shellProc) stop() {
	p.stdin.Close()
	p.cancel()
}

// start runs a new bash in s.dir with s.exports restored.
func (s *liveShell) start() (*shellProc, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &shellProc{stdin: pw, cancel: cancel, done: make(chan struct{})}
	opts := driver.ExecOptions{Workdir: s.dir, Stdin: pr, Timeout: kernelLifetime, OutputLimit: 64 << 10,
		OnStdout: p.output, OnStderr: p.output}
	go func() {
		defer close(p.done)
		defer pr.Close()
		res, err := s.h.ExecuteCommand(ctx, "exec bash --noprofile --norc", opts)
		p.mu.Lock()
		p.res, p.err = res, err
		p.mu.Unlock()
	}()
	pre := shellPreamble
	if s.exports != "" {
		pre += "{\n" + s.exports + "\n} >/dev/null 2>&1\n"
	}
	if _, err := io.WriteString(pw, pre); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// output routes the shell's output to the running command, holding back
// what could be the start of its marker, and keeps what follows it.
func (p *shellProc) output(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended == nil || p.after != nil {
		if p.after != nil && len(p.after) < maxShellState {
			p.after = append(p.after, b...)
		}
		return
	}
	p.held = append(p.held, b...)
	if i := bytes.Index(p.held, p.marker); i >= 0 {
		p.sink(p.held[:i])
		p.after = append([]byte{}, p.held[i+len(p.marker):]...)
		p.held = nil
		close(p.ended)
		return
	}
	keep := 0
	for k := min(len(p.held), len(p.marker)-1); k > 0; k-- {
		if bytes.HasSuffix(p.held, p.marker[:k]) {
			keep = k
			break
		}
	}
	p.sink(p.held[:len(p.held)-keep])
	p.held = append(p.held[:0:0], p.held[len(p.held)-keep:]...)
}

// ansiQuote quotes v as bash's $'...' so that it fits on one line.
func ansiQuote(v string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func (s *liveShell) Exec(ctx context.Context, command string, opts driver.ExecOptions, merge bool) (*driver.CommandResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replay != nil || !merge || strings.IndexByte(command, 0) >= 0 {
		return s.fallback().Exec(ctx, command, opts, merge)
	}
	prevDir := s.dir
	if opts.Workdir != "" && (opts.Workdir != s.dir || s.p == nil) {
		if s.p != nil {
			// exec_dir: a new shell starts there, with the exports, once
			// the Handle accepts the directory (a refused one leaves the
			// running shell alone).
			if err := checkWorkdir(ctx, s.h, opts.Workdir); err != nil {
				return nil, err
			}
			s.p.stop()
			s.p = nil
		}
		s.dir = opts.Workdir
	}
	if s.p == nil {
		p, err := s.start()
		if err != nil {
			return nil, err
		}
		s.p = p
	}
	p := s.p
	marker := "__sage_end_" + driver.NewID("m") + "__"
	out := driver.NewBoundedBuffer(max(opts.OutputLimit/2, 1))
	p.mu.Lock()
	p.marker, p.held, p.after, p.ended = []byte(marker+" "), nil, nil, make(chan struct{})
	p.sink = func(b []byte) {
		if len(b) > 0 {
			out.Write(b)
			if opts.OnStdout != nil {
				opts.OnStdout(b)
			}
		}
	}
	ended := p.ended
	p.mu.Unlock()

	var env strings.Builder
	for _, k := range sortedKeys(opts.Env) {
		env.WriteString("export " + k + "=" + shQuote(opts.Env[k]) + "; ")
	}
	start := time.Now()
	line := "__sage_run " + ansiQuote(env.String()+command) + " " + marker + "\n"
	if _, err := io.WriteString(p.stdin, line); err != nil {
		return s.died(ctx, p, out, start, command, opts)
	}
	stopIn := copyStdin(p.stdin, opts.Stdin)
	defer stopIn()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = driver.DefaultTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ended:
	case <-p.done:
		select {
		case <-ended:
			// The command ended the shell (exit): its marker and state came
			// before bash ended, and select chose between the two at random.
			return s.finish(p, out, start)
		default:
		}
		res, err := s.died(ctx, p, out, start, command, opts)
		if err != nil {
			s.dir = prevDir // a refused exec_dir does not stick
		}
		return res, err
	case <-t.C:
		s.kill(p)
		text, _ := out.Text()
		return &driver.CommandResult{Stdout: text, ExitCode: 137, Signal: "SIGKILL", TimedOut: true, Duration: time.Since(start)}, nil
	case <-ctx.Done():
		s.kill(p)
		return nil, fmt.Errorf("aioserver: command cancelled: %w", ctx.Err())
	}
	return s.finish(p, out, start)
}

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
