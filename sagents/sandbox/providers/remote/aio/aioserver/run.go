package aioserver

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// run is a command the server runs in a session's Shell, in its own
// goroutine: the request that started it may answer before it ends
// (timeout), and later requests read its output so far, wait for it,
// write to its stdin or kill it. Its live output is kept up to limit
// bytes per stream: the first limit bytes (what arrives later is counted,
// not kept), or with window at least the last limit bytes (at most twice
// that), offsets staying absolute (base counts what was dropped).
type run struct {
	cancel context.CancelFunc
	done   chan struct{}
	stdin  *os.File // write end of the command's stdin pipe; nil without one
	// closeStdin ends the command's stdin. A provider that copies stdin
	// (local mode) waits for its end before the command counts as ended,
	// so it is closed when the shell reports its exit on stderr (merged
	// mode: stderr carries nothing else), when the command is stopped,
	// and at the latest a grace period after its timeout.
	closeStdin func()

	mu             sync.Mutex
	stdout, stderr stream
	received       int64 // bytes of output seen, kept or not
	limit          int
	pidLine        []byte // with runSpec.pid, until its newline arrived
	wantPid        bool
	pid            int
	pidRead        chan struct{} // closed once the pid line was read (or was not one); nil without runSpec.pid
	window         bool
	res            *driver.CommandResult
	err            error
}

// stream is one output stream of a run: b holds bytes base.. of it.
type stream struct {
	b    []byte
	base int64
}

// runSpec says how a run handles its streams: merge writes stderr to
// stdout's pipe; stdin gives the command a pipe write feeds (else
// /dev/null); limit bounds each stream kept; window keeps the last limit
// bytes instead of the first, and keeps the live streams at the end (an
// async command: readers follow it by absolute offsets).
type runSpec struct {
	merge, stdin, window bool
	limit                int
	// pid: the command first writes pidMark, its shell's pid (the group
	// leader's) and a newline to stderr; the run strips that line and
	// keeps the pid (passthrough: a host pid the server can SIGKILL).
	pid bool
}

// pidMark starts the line a command writes with runSpec.pid.
const pidMark = "\x1esage-pid "

// pidPrefix is the shell text that writes it.
const pidPrefix = `printf '\036sage-pid %d\n' "$$" >&2` + "\n"

// startRun runs command in sh. With withStdin, the command's stdin is a
// pipe that write feeds (a terminal's stdin); otherwise /dev/null. The
// run's context ends with parent or with stop.
func startRun(parent context.Context, sh Shell, command string, opts driver.ExecOptions, spec runSpec) (*run, error) {
	ctx, cancel := context.WithCancel(parent)
	merge := spec.merge
	r := &run{cancel: cancel, done: make(chan struct{}), limit: spec.limit, window: spec.window, closeStdin: func() {}, wantPid: spec.pid}
	if spec.pid {
		command = pidPrefix + command
		r.pidRead = make(chan struct{})
	}
	var stdinR *os.File
	if spec.stdin {
		pr, pw, err := os.Pipe()
		if err != nil {
			cancel()
			return nil, err
		}
		stdinR, r.stdin = pr, pw
		opts.Stdin = pr
		var once sync.Once
		r.closeStdin = func() {
			once.Do(func() { pw.Close() })
		}
		grace := time.AfterFunc(opts.Timeout+10*time.Second, r.closeStdin)
		defer func() {
			go func() { <-r.done; grace.Stop() }()
		}()
	}
	opts.OnStdout = func(b []byte) { r.append(&r.stdout, b) }
	if !merge {
		opts.OnStderr = func(b []byte) { r.append(&r.stderr, r.takePid(b)) }
	} else if spec.stdin {
		opts.OnStderr = func([]byte) { go r.closeStdin() }
	}
	go func() {
		defer close(r.done)
		defer cancel()
		res, err := sh.Exec(ctx, command, opts, merge)
		r.mu.Lock()
		r.res, r.err = res, err
		if res != nil && !r.window {
			// The final streams are the reference: the shell has removed
			// its own bookkeeping from them.
			r.stdout = stream{b: []byte(res.Stdout)}
			r.stderr = stream{b: []byte(res.Stderr)}
		}
		r.mu.Unlock()
		if stdinR != nil {
			r.closeStdin()
			stdinR.Close()
		}
	}()
	return r, nil
}

// takePid strips the pid line from the start of stderr and keeps the pid.
func (r *run) takePid(b []byte) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.wantPid {
		return b
	}
	r.pidLine = append(r.pidLine, b...)
	i := bytes.IndexByte(r.pidLine, '\n')
	if i < 0 && len(r.pidLine) < 64 {
		return nil
	}
	r.wantPid = false
	close(r.pidRead)
	line, rest := r.pidLine, []byte(nil)
	if i >= 0 {
		line, rest = r.pidLine[:i], r.pidLine[i+1:]
	}
	r.pidLine = nil
	if n, err := strconv.Atoi(strings.TrimPrefix(string(line), pidMark)); err == nil && strings.HasPrefix(string(line), pidMark) && n > 1 {
		r.pid = n
		return rest
	}
	return append(line, rest...) // not the line: the command's own output
}

// kill ends the command at once with SIGKILL to its process group when
// its pid is a host pid (hostPids: a passthrough sandbox), else as stop.
func (r *run) kill(hostPids bool) {
	if hostPids && r.pidRead != nil {
		// stdout and stderr are read apart: the command's first output
		// can be seen before the pid line it wrote first.
		t := time.NewTimer(5 * time.Second)
		select {
		case <-r.pidRead:
		case <-r.done:
		case <-t.C:
		}
		t.Stop()
	}
	r.mu.Lock()
	pid := r.pid
	r.mu.Unlock()
	if hostPids && pid > 1 && !r.finished() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	r.stop()
}

func (r *run) append(dst *stream, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.received += int64(len(b))
	if !r.window {
		if room := r.limit - len(dst.b); room > 0 {
			dst.b = append(dst.b, b[:min(room, len(b))]...)
		}
		return
	}
	dst.b = append(dst.b, b...)
	// Compact only past twice the window: copying stays amortised.
	if over := len(dst.b) - r.limit; over > r.limit {
		dst.base += int64(over)
		dst.b = append(dst.b[:0:0], dst.b[over:]...)
	}
}

func (r *run) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits until the command ends or ctx is done; it reports whether
// the command ended.
func (r *run) wait(ctx context.Context) bool {
	select {
	case <-r.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitFor waits at most d (forever when d < 0).
func (r *run) waitFor(ctx context.Context, d time.Duration) bool {
	if d < 0 {
		return r.wait(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// waitQuiet waits like waitFor but also returns, with quiet set, once no
// output has arrived for quiet (a shell's no_change_timeout).
func (r *run) waitQuiet(ctx context.Context, d, quiet time.Duration) (ended, quietFor bool) {
	if quiet <= 0 {
		return r.waitFor(ctx, d), false
	}
	start := time.Now()
	last, changed := int64(-1), start
	for {
		if r.waitFor(ctx, 25*time.Millisecond) {
			return true, false
		}
		now := time.Now()
		if ctx.Err() != nil || (d >= 0 && now.Sub(start) >= d) {
			return false, false
		}
		r.mu.Lock()
		n := r.received
		r.mu.Unlock()
		if n != last {
			last, changed = n, now
		} else if now.Sub(changed) >= quiet {
			return false, true
		}
	}
}

// stop kills the command (the Handle's SIGTERM, then SIGKILL).
func (r *run) stop() {
	r.cancel()
	r.closeStdin()
}

// write sends data to the command's stdin.
func (r *run) write(data []byte) error {
	r.mu.Lock()
	in := r.stdin
	over := r.res != nil || r.err != nil || r.finished()
	r.mu.Unlock()
	if in == nil || over {
		return badArg("the command is not running or has no stdin")
	}
	// The pipe buffer is 64 KiB; a command that does not read would block
	// the writer, so the write has a deadline. Output keeps flowing
	// meanwhile (the lock is not held).
	_ = in.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := in.Write(data); err != nil {
		return badArg("the command does not take input: " + err.Error())
	}
	return nil
}

// snapshot is the run's state: output so far and, once ended, its result.
type runSnapshot struct {
	stdout, stderr string
	// outBase and errBase are the offsets of stdout's and stderr's first
	// byte (non-zero once a window dropped output).
	outBase, errBase int64
	res              *driver.CommandResult
	err              error
	done             bool
}

func (r *run) snapshot() runSnapshot {
	done := r.finished()
	r.mu.Lock()
	defer r.mu.Unlock()
	return runSnapshot{stdout: string(r.stdout.b), stderr: string(r.stderr.b), outBase: r.stdout.base, errBase: r.stderr.base,
		res: r.res, err: r.err, done: done}
}
