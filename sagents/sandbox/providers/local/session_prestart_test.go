//go:build linux

package local_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

// waitSessionPID waits up to 10 s for s's session sandbox to run.
func waitSessionPID(s *local.Sandbox) int {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if pid := s.SessionPID(); pid != 0 {
			return pid
		}
	}
	return 0
}

// TestSessionPrestart: with Prestart the session sandbox comes up with
// no command asking for it, and the first command runs in it (same pid,
// not a restart). Control: without Prestart nothing runs until the first
// command.
func TestSessionPrestart(t *testing.T) {
	s := newSession(t, local.SessionOptions{Prestart: true}, nil)
	pid := waitSessionPID(s)
	require.NotZero(t, pid, "no session sandbox came up without a command")
	res := sh(t, s, "echo in", sandbox.ExecOptions{})
	assert.Equal(t, "in\n", res.Stdout, res.Stderr)
	assert.False(t, res.SessionRestarted, "the prestarted sandbox is the session's first, not a restart")
	assert.Equal(t, pid, s.SessionPID(), "the first command started another session sandbox")

	t.Run("control", func(t *testing.T) {
		s := newSession(t, local.SessionOptions{}, nil)
		time.Sleep(200 * time.Millisecond)
		assert.Zero(t, s.SessionPID(), "a session sandbox started without Prestart or a command")
		sh(t, s, "true", sandbox.ExecOptions{})
		assert.NotZero(t, s.SessionPID())
	})
}

// TestSessionPrestartClose: Close right after opening, while the
// prestart may still be under way, leaves no session sandbox running.
func TestSessionPrestartClose(t *testing.T) {
	for range 3 {
		s := newSession(t, local.SessionOptions{Prestart: true}, nil)
		time.Sleep(time.Millisecond)
		pid := s.SessionPID()
		require.NoError(t, s.Close(context.Background()))
		if pid != 0 {
			assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the session sandbox outlived Close")
		}
		_, err := s.Exec(context.Background(), driver.ExecSpec{Command: "true"})
		assert.Error(t, err, "a command ran after Close")
	}
}

// TestSessionPrestartFromConfig: local.prestart in the configuration (not
// only the library option) starts the session sandbox when the Sandbox
// opens. Control: without it no session sandbox runs before a command.
func TestSessionPrestartFromConfig(t *testing.T) {
	for _, prestart := range []bool{true, false} {
		s := newLocal(t, func(c *sandbox.Config) { c.Local.Prestart = prestart })
		d := s.Driver().(*local.Sandbox)
		if prestart {
			assert.NotZero(t, waitSessionPID(d), "local.prestart: no session sandbox came up without a command")
			continue
		}
		time.Sleep(200 * time.Millisecond)
		assert.Zero(t, d.SessionPID(), "control: a session sandbox started without prestart or a command")
	}
}
