package aioserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Bounds of the code kernels: how many live at once (past it the least
// recently used idle one is closed), how long one may sit idle (the AIO
// documentation's 30 minutes), how long one lives at most, the output
// one execution returns per stream, and the size of one answer line.
const (
	maxKernels       = 32
	kernelIdle       = 30 * time.Minute
	kernelLifetime   = 7 * 24 * time.Hour
	kernelOutput     = 1 << 20
	maxKernelAnswer  = 4*kernelOutput + 1<<20
	kernelStderrTail = 4 << 10
)

// kernel is one long-lived interpreter (python3 or node) in the sandbox,
// run through the Handle like any command, whose state (variables,
// imports, functions) lasts from one execution to the next. It is fed over
// its stdin with a small framing protocol: a line with the byte length of
// a JSON request, then the request ({"code", "cwd"}). It answers each
// request with one JSON line on its stdout (kernelAnswer). While user code
// runs, the interpreter points its fds 1 and 2 at files it reads back, so
// the output of the code and of its subprocesses is captured and the
// answer channel stays clean; between executions they point at /dev/null.
type kernel struct {
	lang   string
	stdin  *os.File
	cancel context.CancelFunc
	done   chan struct{}
	answer chan []byte

	exec sync.Mutex // one execution at a time

	mu       sync.Mutex
	buf      []byte // stdout not yet split into lines
	stderr   []byte // the interpreter's own stderr, its last bytes
	res      *driver.CommandResult
	err      error
	lastUsed time.Time
	// held are the checkpoints whose state a copy of this Python kernel
	// holds (kernel_checkpoint.go), oldest first; under exec.
	held []driver.CheckpointID
}

// kernelAnswer is an interpreter's answer to one execution.
type kernelAnswer struct {
	Status         string   `json:"status"` // ok or error
	ExecutionCount int      `json:"execution_count"`
	Stdout         string   `json:"stdout"`
	Stderr         string   `json:"stderr"`
	Result         *string  `json:"result"` // the value of a final expression
	Ename          string   `json:"ename"`
	Evalue         string   `json:"evalue"`
	Traceback      []string `json:"traceback"`
}

// answerPrefix starts every answer line of both drivers.
var answerPrefix = []byte(`{"status"`)

// errKernelTimeout: the execution took longer than its timeout; the
// kernel was stopped (its state is lost).
var errKernelTimeout = errors.New("execution timed out")

// startKernel runs command (an interpreter reading the protocol) in dir.
// A resident kernel (a session's, in kernels) is one checkpoints are
// taken beside (kernels holds it meanwhile); a kernel of one execution is
// a running command like any other.
func startKernel(h *sandbox.Sandbox, lang, command, dir string, resident bool) (*kernel, error) {
	if h.Type() == driver.Remote {
		// Its commands' stdin is read whole before they start.
		return nil, fmt.Errorf("%w: code sessions need a sandbox whose commands read an open stdin; this one is remote", driver.ErrUnsupported)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kernel{lang: lang, stdin: pw, cancel: cancel, done: make(chan struct{}), answer: make(chan []byte, 1), lastUsed: time.Now()}
	opts := driver.ExecOptions{Workdir: dir, Stdin: pr, Timeout: kernelLifetime, OutputLimit: 64 << 10,
		OnStdout: k.onStdout, OnStderr: k.onStderr, Resident: resident}
	go func() {
		defer close(k.done)
		defer pr.Close()
		res, err := h.ExecuteCommand(ctx, command, opts)
		k.mu.Lock()
		k.res, k.err = res, err
		k.mu.Unlock()
	}()
	return k, nil
}

func (k *kernel) onStdout(b []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.buf = append(k.buf, b...)
	for {
		i := bytes.IndexByte(k.buf, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(nil), k.buf[:i]...)
		k.buf = k.buf[i+1:]
		if !bytes.HasPrefix(line, answerPrefix) {
			continue // not the driver's (a child writing to the inherited fd)
		}
		select {
		case k.answer <- line:
		default: // nobody asked: not an answer
		}
	}
	if len(k.buf) > maxKernelAnswer {
		k.buf = nil
		go k.close() // a broken interpreter: its state is not worth keeping
	}
}

func (k *kernel) onStderr(b []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stderr = append(k.stderr, b...)
	if n := len(k.stderr) - kernelStderrTail; n > 0 {
		k.stderr = append(k.stderr[:0:0], k.stderr[n:]...)
	}
}

func (k *kernel) alive() bool {
	select {
	case <-k.done:
		return false
	default:
		return true
	}
}

// run executes code (with the working directory cwd first, when set) and
// waits at most timeout for the answer. On timeout the kernel is closed.
func (k *kernel) run(ctx context.Context, code, cwd string, timeout time.Duration) (*kernelAnswer, error) {
	k.exec.Lock()
	defer k.exec.Unlock()
	k.mu.Lock()
	k.lastUsed = time.Now()
	k.mu.Unlock()
	return k.call(ctx, map[string]any{"code": code, "cwd": cwd}, timeout)
}

// call sends one request (an execution, or a checkpoint operation) and
// waits at most timeout for its answer; the caller holds exec.
func (k *kernel) call(ctx context.Context, r map[string]any, timeout time.Duration) (*kernelAnswer, error) {
	req, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	select { // a stale answer from an execution nobody waited for
	case <-k.answer:
	default:
	}
	frame := append([]byte(strconv.Itoa(len(req))+"\n"), req...)
	_ = k.stdin.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := k.stdin.Write(frame); err != nil {
		return nil, k.failure(fmt.Errorf("send code to the %s kernel: %w", k.lang, err))
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line := <-k.answer:
		var a kernelAnswer
		if err := json.Unmarshal(line, &a); err != nil {
			k.close()
			return nil, fmt.Errorf("the %s kernel answered garbage (%v); it was stopped", k.lang, err)
		}
		return &a, nil
	case <-k.done:
		return nil, k.failure(nil)
	case <-t.C:
		k.close()
		return nil, errKernelTimeout
	case <-ctx.Done():
		k.close() // the code may still run: a later answer would be its
		return nil, ctx.Err()
	}
}

// failure explains why the interpreter ended: not installed (exit 127:
// driver.ErrUnsupported), or its exit status and last stderr.
func (k *kernel) failure(cause error) error {
	select {
	case <-k.done:
	case <-time.After(5 * time.Second):
		if cause != nil {
			return cause
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	tail := string(bytes.TrimSpace(k.stderr))
	if k.res != nil && k.res.ExitCode == 127 {
		return fmt.Errorf("%w: %s is not installed in the sandbox: %s", driver.ErrUnsupported, k.lang, tail)
	}
	code := -1
	if k.res != nil {
		code = k.res.ExitCode
	}
	return fmt.Errorf("the %s kernel exited (status %d); its state is lost: %s", k.lang, code, tail)
}

// close stops the interpreter (end of stdin, then the Handle's kill).
func (k *kernel) close() {
	k.stdin.Close()
	k.cancel()
}

func (k *kernel) wait(ctx context.Context) {
	select {
	case <-k.done:
	case <-ctx.Done():
	}
}
