//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

// TestGvisorCheckpointsRefused: what gVisor checkpoints still cannot do
// is one config error naming the field, the setting and the fix: with
// fresh_per_command (a sandbox per command, none to checkpoint) and with
// the network on (host sockets in the sandbox, which runsc restore cannot
// hand back).
func TestGvisorCheckpointsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*sandbox.Config)
	}{
		{"FreshPerCommand", "fresh_per_command gives each command a sandbox of its own", func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh }},
		{"NetworkOpen", "need network off (network open", func(c *sandbox.Config) { c.Local.Network = sandbox.NetworkOpen }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newLocalErr(t, func(c *sandbox.Config) {
				c.Local.Isolation.Linux = sandbox.IsolationGvisor
				c.Local.Checkpoints = true
				tc.edit(c)
				requireGvisor(t)
			})
			var ce *driver.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "sandbox.local.checkpoints", ce.Field)
			assert.Contains(t, ce.Reason, tc.want)
			assert.Contains(t, ce.Reason, "fix: ")
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// TestGvisorCheckpointProbe runs runsc checkpoint and restore on a sandbox
// of the session sandbox's shape, as sage doctor does: the checkpoint
// works, and the restore fails on a control socket donated with
// --pass-fd, which is why a gVisor session with checkpoints has its
// socket on the sandbox's stdin and stdout: there the restore works and
// the restored process answers on a new socket. The probe leaves no
// directory, mount or sandbox behind.
func TestGvisorCheckpointProbe(t *testing.T) {
	requireGvisor(t)
	runsc, err := exec.LookPath("runsc")
	require.NoError(t, err)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	res, err := local.GvisorCheckpointProbe(context.Background(), runsc)
	require.NoError(t, err)
	assert.Positive(t, res.Checkpoint)
	t.Logf("--pass-fd: runsc checkpoint %v, restore %v (%v); stdio: checkpoint %v, restore %v (%v)", res.Checkpoint, res.Restore,
		res.RestoreErr, res.StdioCheckpoint, res.StdioRestore, res.StdioErr)
	require.Error(t, res.RestoreErr, "runsc restore now restores a sandbox with a descriptor donated by --pass-fd: "+
		"every gVisor session could keep --pass-fd; update docs/checkpoints.md")
	assert.Contains(t, res.RestoreErr.Error(), "no host FD available")
	assert.Less(t, len(res.RestoreErr.Error()), 500, "the runsc error is cut to its telling line")
	// With the control socket on stdin and stdout, runsc restore hands it
	// back: the restored shell echoes on the new socket (docs/checkpoints.md).
	require.NoError(t, res.StdioErr)
	assert.Positive(t, res.StdioCheckpoint)
	assert.Positive(t, res.StdioRestore)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the probe's directory is removed")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), tmp, "no null-netns mount is left")
	out, _ := exec.Command("pgrep", "-f", "sage-ckpt-probe").Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "no runsc process of the probe is left")

	sum, err := local.GvisorCheckpointsSummary(context.Background())
	require.NoError(t, err)
	assert.Contains(t, sum, "offered under isolation gvisor")
	assert.Contains(t, sum, "files+processes")
}

// TestGvisorCheckpointProbeNoRunsc: a runsc that cannot run is the
// probe's error, not a finding.
func TestGvisorCheckpointProbeNoRunsc(t *testing.T) {
	requireGvisor(t)
	t.Setenv("TMPDIR", t.TempDir())
	_, err := local.GvisorCheckpointProbe(context.Background(), "/nonexistent/runsc")
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "runsc run"), err.Error())
}

// TestGvisorCheckpointsNotRoot: as an ordinary user, checkpoints under
// isolation gvisor are one config error naming the field and the fix (as
// root, the test re-runs itself as an ordinary user).
func TestGvisorCheckpointsNotRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		requireBwrap(t)
		_, err := testenv.RunUnprivileged(t, []string{"-test.run", "^TestGvisorCheckpointsNotRoot$", "-test.count=1"})
		require.NoError(t, err, "as an ordinary user")
		return
	}
	_, err := newLocalErr(t, func(c *sandbox.Config) {
		c.Local.Isolation.Linux = sandbox.IsolationGvisor
		c.Local.Checkpoints = true
	})
	var ce *driver.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "sandbox.local.checkpoints", ce.Field)
	assert.Contains(t, ce.Reason, "run runsc checkpoint and restore as root")
	assert.Contains(t, ce.Reason, "fix: run sage as root, or use isolation bwrap")
}
