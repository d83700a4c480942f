package hostkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Background runs and tracks background tasks for a provider; its methods
// implement the BackgroundRunner capability, so drivers embed it. Each task
// runs in its own process group with stdout and stderr appended to one
// log file. When a task's leader exits, the rest of its group is killed.
type Background struct {
	dir   string
	grace time.Duration

	mu     sync.Mutex
	tasks  map[string]*bgTask
	closed bool
}

type bgTask struct {
	id, log   string
	pgid      int
	terminate func()
	signal    func(syscall.Signal) // nil: the signal goes to the process group pgid
	done      chan struct{}
	state     driver.BackgroundState // valid once done is closed
}

// Launch is what a provider wants run as a background task.
type Launch struct {
	Path        string
	Args        []string
	Dir         string
	Env         []string
	SysProcAttr *syscall.SysProcAttr
	// ExtraFiles and Terminate work as in ProcessSpec.
	ExtraFiles []*os.File
	Terminate  func()
	Start      func(*exec.Cmd) error // as in ProcessSpec
	Started    func(pid int) error
	// Run, when set, starts the task instead of Path and Args (a driver
	// whose tasks run inside a long-lived sandbox): it gets the task's
	// log for stdout and stderr, and returns the host pid of the task's
	// process-group leader and a function that waits for the leader's end
	// and returns its exit code and signal name. It must not return
	// before the task runs.
	Run func(ctx context.Context, log *os.File) (pid int, wait func() (code int, signal string), err error)
	// Signal, when set, delivers every signal to the task (SIGTERM unless
	// Terminate is set, SIGKILL): for a task whose pid is not a host pid
	// (one inside a gVisor sandbox), no signal then goes to a host process
	// group, and the pid Run returns is only reported.
	Signal func(sig syscall.Signal)
}

// NewBackground keeps task logs in logDir (created on first use). grace
// is the time between SIGTERM and SIGKILL; 0 means DefaultKillGrace.
func NewBackground(logDir string, grace time.Duration) *Background {
	if grace <= 0 {
		grace = driver.DefaultKillGrace
	}
	return &Background{dir: logDir, grace: grace, tasks: map[string]*bgTask{}}
}

// Start launches a task. ctx only bounds the start itself.
func (b *Background) Start(ctx context.Context, l Launch) (*driver.BackgroundTask, error) {
	defer closeFiles(l.ExtraFiles) // the child has its copies once started
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b.isClosed() {
		return nil, driver.ErrClosed
	}
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: background log dir: %w", err)
	}
	id := driver.NewID("bg")
	logPath := filepath.Join(b.dir, id+".log")
	pid, wait, err := b.launch(ctx, l, logPath)
	if err != nil {
		os.Remove(logPath)
		return nil, fmt.Errorf("sandbox: start background task: %w", err)
	}
	t := &bgTask{id: id, log: logPath, pgid: pid, terminate: l.Terminate, signal: l.Signal, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed { // closed while starting: leave nothing running
		b.mu.Unlock()
		t.kill1(syscall.SIGKILL)
		wait()
		return nil, driver.ErrClosed
	}
	b.tasks[id] = t
	b.mu.Unlock()
	go t.reap(wait)
	return &driver.BackgroundTask{ID: id, PID: t.pgid, LogPath: logPath}, nil
}

// launch starts the process with its output in the log and runs
// l.Started, outside the lock (it may wait for a sandbox to come up).
func (b *Background) launch(ctx context.Context, l Launch, logPath string) (int, func() (int, string), error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return 0, nil, err
	}
	defer logf.Close()
	if l.Run != nil {
		return l.Run(ctx, logf)
	}
	cmd := &exec.Cmd{Path: l.Path, Args: l.Args, Dir: l.Dir, Env: l.Env, Stdout: logf, Stderr: logf, ExtraFiles: l.ExtraFiles}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if l.SysProcAttr != nil {
		*cmd.SysProcAttr = *l.SysProcAttr
	}
	cmd.SysProcAttr.Setpgid = true
	start := cmd.Start
	if l.Start != nil {
		start = func() error { return l.Start(cmd) }
	}
	if err := start(); err != nil {
		return 0, nil, err
	}
	closeFiles(l.ExtraFiles)
	if l.Started != nil {
		if err := l.Started(cmd.Process.Pid); err != nil {
			killGroup(cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			return 0, nil, err
		}
	}
	return cmd.Process.Pid, func() (int, string) { cmd.Wait(); return exitStatus(cmd.ProcessState) }, nil
}

func (b *Background) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (t *bgTask) reap(wait func() (int, string)) {
	code, sig := wait()
	t.kill1(syscall.SIGKILL)
	t.state = driver.BackgroundState{ExitCode: code, Signal: sig}
	close(t.done)
}

func (b *Background) task(id string) (*bgTask, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", driver.ErrUnknownTask, id)
	}
	return t, nil
}

// ReadBackgroundOutput returns at most max bytes of the task's log from
// offset (max <= 0 means 64 KiB). The text never ends inside a UTF-8
// sequence unless a single character is longer than max.
func (b *Background) ReadBackgroundOutput(_ context.Context, taskID string, offset int64, max int) (driver.BackgroundOutput, error) {
	if offset < 0 {
		return driver.BackgroundOutput{}, fmt.Errorf("sandbox: read background output: negative offset %d", offset)
	}
	if max <= 0 {
		max = 64 << 10
	}
	t, err := b.task(taskID)
	if err != nil {
		return driver.BackgroundOutput{}, err
	}
	f, err := os.Open(t.log)
	if err != nil {
		return driver.BackgroundOutput{}, fmt.Errorf("sandbox: background log: %w", err)
	}
	defer f.Close()
	buf := make([]byte, max)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return driver.BackgroundOutput{}, fmt.Errorf("sandbox: background log: %w", err)
	}
	buf = buf[:n]
	if trimmed := driver.TrimPartialRune(buf); len(trimmed) > 0 {
		buf = trimmed
	}
	return driver.BackgroundOutput{Text: string(buf), NextOffset: offset + int64(len(buf))}, nil
}

// BackgroundStatus reports whether the task runs, and how it ended.
func (b *Background) BackgroundStatus(_ context.Context, taskID string) (driver.BackgroundState, error) {
	t, err := b.task(taskID)
	if err != nil {
		return driver.BackgroundState{}, err
	}
	select {
	case <-t.done:
		return t.state, nil
	default:
		return driver.BackgroundState{Alive: true}, nil
	}
}

// KillBackground ends the task and waits until its leader is gone:
// SIGTERM (or the Launch's Terminate), then SIGKILL to its process group
// after the grace period (at once with force). Killing a finished task is
// not an error.
func (b *Background) KillBackground(ctx context.Context, taskID string, force bool) error {
	t, err := b.task(taskID)
	if err != nil {
		return err
	}
	return t.kill(ctx, force, b.grace)
}

// kill1 sends sig to the task: through its Launch's Signal, else to
// its process group.
func (t *bgTask) kill1(sig syscall.Signal) {
	if t.signal != nil {
		t.signal(sig)
		return
	}
	killGroup(t.pgid, sig)
}

func (t *bgTask) kill(ctx context.Context, force bool, grace time.Duration) error {
	select {
	case <-t.done:
		return nil
	default:
	}
	if !force {
		if t.terminate != nil {
			t.terminate()
		} else {
			t.kill1(syscall.SIGTERM)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-t.done:
			return nil
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	t.kill1(syscall.SIGKILL)
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sandbox: kill %s: %w", t.id, ctx.Err())
	}
}

// Close kills every task that still runs. It is idempotent; later Starts
// fail with ErrClosed.
func (b *Background) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	tasks := make([]*bgTask, 0, len(b.tasks))
	for _, t := range b.tasks {
		tasks = append(tasks, t)
	}
	b.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, t := range tasks {
		wg.Go(func() {
			if err := t.kill(ctx, false, b.grace); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Wait blocks until the task ends; an unknown task returns at once.
func (b *Background) Wait(taskID string) {
	if t, err := b.task(taskID); err == nil {
		<-t.done
	}
}
