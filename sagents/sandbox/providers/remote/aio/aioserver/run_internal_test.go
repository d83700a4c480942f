package aioserver

import (
	"context"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
)

// lateStderrShell runs sleep in a process group of its own and reports
// its first stdout before the pid line on stderr, as two pipes read apart
// may: the command's output is seen, its pid is not known yet. A
// cancelled context ends it with SIGTERM (as the Handle does).
type lateStderrShell struct{ delay time.Duration }

func (s lateStderrShell) Exec(ctx context.Context, _ string, opts sandbox.ExecOptions, _ bool) (*sandbox.CommandResult, error) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		case <-done:
		}
	}()
	opts.OnStdout([]byte("up\n"))
	time.Sleep(s.delay)
	opts.OnStderr([]byte(pidMark + strconv.Itoa(cmd.Process.Pid) + "\n"))
	err := cmd.Wait()
	close(done)
	res := &sandbox.CommandResult{ExitCode: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
		res.ExitCode = -int(ws.Signal())
	}
	_ = err
	return res, nil
}

func (lateStderrShell) Dir() string                 { return "/" }
func (lateStderrShell) Close(context.Context) error { return nil }

// A forced kill of an async command whose output was seen before its pid
// line is SIGKILL, not the SIGTERM of a cancel (CI saw -15 for
// TestBashKillForce_SDKBashKill). Control: with the pid line read first,
// the kill is SIGKILL too.
func TestForcedKillWaitsForThePid(t *testing.T) {
	for _, delay := range []time.Duration{300 * time.Millisecond, 0} {
		r, err := startRun(context.Background(), lateStderrShell{delay: delay}, "sleep 60", sandbox.ExecOptions{}, runSpec{pid: true, limit: 1 << 10})
		require.NoError(t, err)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			r.mu.Lock()
			up := string(r.stdout.b) == "up\n"
			r.mu.Unlock()
			if up {
				break
			}
		}
		r.kill(true)
		require.True(t, r.waitFor(context.Background(), 30*time.Second), "the command did not end")
		r.mu.Lock()
		res := r.res
		r.mu.Unlock()
		require.NotNil(t, res)
		assert.Equal(t, "killed", res.Signal, "delay %v: SIGKILL, not SIGTERM", delay)
	}
}
