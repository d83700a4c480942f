package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

func testBackground(t *testing.T, o Options) {
	h := open(t, o)
	c := ctx(t)
	if o.NoBackground {
		_, err := h.StartBackground(c, "true", driver.ExecOptions{})
		assert.ErrorIs(t, err, driver.ErrUnsupported)
		return
	}
	t.Run("read by offsets, exit code after", func(t *testing.T) {
		task, err := h.StartBackground(c, "for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done; exit 3", driver.ExecOptions{})
		require.NoError(t, err)
		assert.NotEmpty(t, task.ID)
		var all strings.Builder
		var off int64
		sawRunning := false
		waitFor(t, 20*time.Second, func() bool {
			out, err := h.ReadBackgroundOutput(c, task.ID, off, 4)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(out.Text), 4)
			all.WriteString(out.Text)
			off = out.NextOffset
			st, err := h.BackgroundStatus(c, task.ID)
			require.NoError(t, err)
			if st.Alive {
				sawRunning = true
				return false
			}
			return out.Text == "" && !st.Alive
		})
		assert.True(t, sawRunning, "task was never seen running")
		assert.Equal(t, "line1\nline2\nline3\nline4\nline5\n", all.String())
		st, err := h.BackgroundStatus(c, task.ID)
		require.NoError(t, err)
		assert.False(t, st.Alive)
		assert.Equal(t, 3, st.ExitCode)
	})
	t.Run("kill gracefully", func(t *testing.T) {
		id := startUp(t, c, h, "echo up; sleep 60")
		require.NoError(t, h.KillBackground(c, id, false))
		st, err := h.BackgroundStatus(c, id)
		require.NoError(t, err)
		assert.False(t, st.Alive)
		if o.SignalsAsExitCodes {
			assert.Equal(t, 128+15, st.ExitCode, "TERM reached the command inside")
		} else {
			assert.Equal(t, "SIGTERM", st.Signal)
		}
	})
	t.Run("kill escalates when TERM is ignored", func(t *testing.T) {
		id := startUp(t, c, h, "trap '' TERM; echo up; while :; do sleep 0.1; done")
		require.NoError(t, h.KillBackground(c, id, false))
		st, _ := h.BackgroundStatus(c, id)
		assert.False(t, st.Alive)
		assert.Equal(t, "SIGKILL", st.Signal)
	})
	t.Run("kill with force", func(t *testing.T) {
		id := startUp(t, c, h, "echo up; sleep 60")
		start := time.Now()
		require.NoError(t, h.KillBackground(c, id, true))
		assert.Less(t, time.Since(start), driver.DefaultKillGrace)
		st, _ := h.BackgroundStatus(c, id)
		assert.Equal(t, "SIGKILL", st.Signal)
		require.NoError(t, h.KillBackground(c, id, true), "killing a finished task is fine")
	})
	t.Run("unknown task", func(t *testing.T) {
		_, err := h.BackgroundStatus(c, "bg-nope")
		assert.ErrorIs(t, err, driver.ErrUnknownTask)
		_, err = h.ReadBackgroundOutput(c, "bg-nope", 0, 10)
		assert.ErrorIs(t, err, driver.ErrUnknownTask)
	})
}

// startUp starts command, which prints "up" once it is ready, as a
// background task and waits for its "up".
func startUp(t *testing.T, c context.Context, h *sandbox.Sandbox, command string) (id string) {
	t.Helper()
	task, err := h.StartBackground(c, command, driver.ExecOptions{})
	require.NoError(t, err)
	waitOutput(t, h, task.ID, "up")
	return task.ID
}

func waitOutput(t *testing.T, h *sandbox.Sandbox, id, want string) {
	t.Helper()
	waitFor(t, 20*time.Second, func() bool {
		out, err := h.ReadBackgroundOutput(context.Background(), id, 0, 0)
		return err == nil && strings.Contains(out.Text, want)
	})
}

func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testClose(t *testing.T, o Options) {
	h := o.New(t)
	c := ctx(t)
	var task *driver.BackgroundTask
	if !o.NoBackground {
		var err error
		task, err = h.StartBackground(c, "sleep 60", driver.ExecOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, h.Close(c))
	require.NoError(t, h.Close(c), "Close is idempotent")
	_, err := h.ExecuteCommand(c, "true", driver.ExecOptions{})
	assert.True(t, errors.Is(err, driver.ErrClosed), "exec after close: %v", err)
	_, err = h.ReadFile(c, "x")
	assert.True(t, errors.Is(err, driver.ErrClosed), "read after close: %v", err)
	if task != nil && o.HostProcesses && !o.NoTaskPIDs {
		assert.ErrorIs(t, syscall.Kill(task.PID, 0), syscall.ESRCH, "a background task survived Close")
	}
}
