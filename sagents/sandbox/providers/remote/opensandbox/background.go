package opensandbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// maxLog bounds the background log one read fetches.
const maxLog = 16 << 20

// bgWrapper records the shell's pid (its process group under execd)
// and then becomes the command, so the group can be killed with SIGKILL
// (execd's interrupt has no force). The command travels in the
// environment, not in the wrapper's text. It runs under the shell execd
// runs the wrapper with ("$0": bash, or sh where there is none), the
// shell of foreground commands too.
const bgWrapper = `echo $$ >"$SAGE_PIDFILE"; c=$SAGE_COMMAND; unset SAGE_COMMAND SAGE_PIDFILE; exec "$0" -c "$c"`

// StartBackground starts command detached; execd keeps its output.
func (s *osSandbox) StartBackground(ctx context.Context, command string, opts driver.ExecOptions) (*driver.BackgroundTask, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if opts.Stdin != nil {
		return nil, fmt.Errorf("opensandbox: background commands take no stdin: %w", driver.ErrUnsupported)
	}
	req, cleanup, err := s.prepare(ctx, bgWrapper, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	pidfile := "/tmp/.sage-bg-" + driver.NewID("pid")
	req.Envs["SAGE_PIDFILE"], req.Envs["SAGE_COMMAND"] = pidfile, command
	req.Background = true
	var id string
	err = s.execd.runCommand(ctx, req, func(ev event) error {
		switch ev.Type {
		case eventInit:
			id = ev.Text
		case eventComplete, eventFailed:
			return errFinal
		}
		return nil
	})
	if err != nil {
		return nil, s.gone(ctx, err)
	}
	if id == "" {
		return nil, fmt.Errorf("opensandbox: background command started without an init event naming it")
	}
	pid := s.readPID(ctx, pidfile)
	s.mu.Lock()
	s.tasks[id] = pid
	s.mu.Unlock()
	return &driver.BackgroundTask{ID: id, PID: pid}, nil
}

// readPID waits up to 2 s for the wrapper's pid file; 0 when it never
// comes (the task can then only be interrupted through execd).
func (s *osSandbox) readPID(ctx context.Context, pidfile string) int {
	defer func() { _ = s.execd.removeFiles(context.WithoutCancel(ctx), pidfile) }()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := s.execd.download(ctx, pidfile, 64)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			return pid
		}
	}
	return 0
}

func (s *osSandbox) known(id string) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, ok := s.tasks[id]
	if !ok {
		return 0, fmt.Errorf("%w: %q", driver.ErrUnknownTask, id)
	}
	return pid, nil
}

// ReadBackgroundOutput reads at most max bytes of the task's combined
// output from byte offset on.
func (s *osSandbox) ReadBackgroundOutput(ctx context.Context, taskID string, offset int64, max int) (driver.BackgroundOutput, error) {
	if _, err := s.known(taskID); err != nil {
		return driver.BackgroundOutput{}, err
	}
	if max <= 0 {
		max = 64 << 10
	}
	offset = max64(offset, 0)
	b, _, err := s.execd.logs(ctx, taskID, offset, int64(min(max, maxLog)))
	if err != nil {
		return driver.BackgroundOutput{}, s.gone(ctx, err)
	}
	return driver.BackgroundOutput{Text: string(b), NextOffset: offset + int64(len(b))}, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// BackgroundStatus reads the task's status. execd reports a task killed
// by a signal as exit code -1 with Go's "signal: killed"; it comes back
// as 128+n with the signal's name, as an exit code 128+n of the shell
// does.
func (s *osSandbox) BackgroundStatus(ctx context.Context, taskID string) (driver.BackgroundState, error) {
	if _, err := s.known(taskID); err != nil {
		return driver.BackgroundState{}, err
	}
	st, err := s.execd.status(ctx, taskID)
	if err != nil {
		return driver.BackgroundState{}, s.gone(ctx, err)
	}
	out := driver.BackgroundState{Alive: st.Running}
	if !st.Running && st.ExitCode != nil {
		out.ExitCode = *st.ExitCode
		if code, sig, ok := signalExit(st.Error); ok && out.ExitCode < 0 {
			out.ExitCode, out.Signal = code, sig
		} else if n := out.ExitCode - 128; n > 0 && n < 65 {
			out.Signal = unix.SignalName(syscall.Signal(n))
		}
	}
	return out, nil
}

// KillBackground ends the task: execd's interrupt, then SIGKILL to the
// task's process group after DefaultKillGrace; with force, SIGKILL at
// once. It returns when execd reports the task ended.
func (s *osSandbox) KillBackground(ctx context.Context, taskID string, force bool) error {
	pid, err := s.known(taskID)
	if err != nil {
		return err
	}
	if st, err := s.execd.status(ctx, taskID); err != nil || !st.Running {
		return s.gone(ctx, err)
	}
	if force && pid > 0 {
		s.killGroup(ctx, pid)
	} else if err := s.execd.interrupt(ctx, taskID); err != nil {
		return s.gone(ctx, err)
	}
	if s.waitEnded(ctx, taskID, driver.DefaultKillGrace) {
		return nil
	}
	if pid > 0 {
		s.killGroup(ctx, pid)
	}
	if s.waitEnded(ctx, taskID, 5*time.Second) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("opensandbox: background task %s still runs after SIGKILL", taskID)
}

func (s *osSandbox) killGroup(ctx context.Context, pid int) {
	_, _, _ = s.shell(ctx, `kill -KILL -- "-$SAGE_PID" 2>/dev/null || kill -KILL "$SAGE_PID"`,
		map[string]string{"SAGE_PID": strconv.Itoa(pid)})
}

func (s *osSandbox) waitEnded(ctx context.Context, taskID string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		st, err := s.execd.status(ctx, taskID)
		if err != nil || !st.Running {
			return err == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}
