//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// requireBwrap fails (or skips with SAGE_TEST_ALLOW_SKIP=1) when bwrap is
// not installed.
func requireBwrap(t testing.TB) {
	t.Helper()
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
}

func newLocal(t testing.TB, mutate func(*sandbox.Config)) *sandbox.Sandbox {
	t.Helper()
	requireBwrap(t)
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// fresh is fresh_per_command: true.
var fresh = true

// TestContract runs the contract suite in local mode's default: the
// session sandbox.
func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Options{
		New: func(t *testing.T) *sandbox.Sandbox {
			s := newLocal(t, nil)
			require.True(t, s.Driver().(*local.Sandbox).SessionEnabled(), "the session sandbox is the default")
			return s
		},
		HostProcesses:      true,
		SignalsAsExitCodes: true,
	})
}

// TestContractFreshPerCommand runs it with fresh_per_command: true.
func TestContractFreshPerCommand(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Options{
		New: func(t *testing.T) *sandbox.Sandbox {
			s := newLocal(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh })
			require.False(t, s.Driver().(*local.Sandbox).SessionEnabled())
			return s
		},
		HostProcesses:      true,
		SignalsAsExitCodes: true,
	})
}

func TestIsolationNoneIsExplicitAndStillLimited(t *testing.T) {
	s := newLocal(t, func(c *sandbox.Config) { c.Local.Isolation.Linux = sandbox.IsolationNone; c.Local.FileSizeLimitMB = 1 })
	res, err := s.ExecuteCommand(context.Background(), "head -c 5000000 /dev/zero > big; echo $?; stat -c %s big", sandbox.ExecOptions{})
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "1048576")
}

func TestMissingBwrapIsAnErrorNotAFallback(t *testing.T) {
	t.Setenv("PATH", sandboxtest.TempDir(t))
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)})
	require.Error(t, err)
	require.True(t, errors.Is(err, sandbox.ErrIsolationUnavailable), "%v", err)
	require.Contains(t, err.Error(), "apt-get install bubblewrap")
}

func TestMountsThatWouldHideOrBeSwappedAreRefused(t *testing.T) {
	requireBwrap(t)
	ws, other := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	newLocal(t, func(c *sandbox.Config) { c.Workspace = ws }) // as root, the workspace becomes the session's
	inside := ws + "/sub"
	require.NoError(t, os.MkdirAll(inside, 0o755))
	cases := map[string][]sandbox.VolumeMount{
		"ancestor of the workspace": {{HostPath: other, SandboxPath: "/workspace"}},
		"under /proc":               {{HostPath: other, SandboxPath: "/proc/x"}},
		"host path in workspace":    {{HostPath: inside, SandboxPath: "/mnt/x"}},
		"inside a rw mount":         {{HostPath: other, SandboxPath: "/mnt/a"}, {HostPath: mkdir(t, other+"/in"), SandboxPath: "/mnt/b", ReadOnly: true}},
	}
	for name, ms := range cases {
		_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(t), Mounts: ms})
		var ce *sandbox.ConfigError
		assert.True(t, errors.As(err, &ce), "%s: %v", name, err)
	}
	// A mount below the workspace is fine, and visible.
	data := mkdir(t, sandboxtest.TempDir(t)+"/d")
	require.NoError(t, os.WriteFile(data+"/f", []byte("nested"), 0o644))
	s := newLocal(t, func(c *sandbox.Config) {
		c.Workspace = ws
		c.Mounts = []sandbox.VolumeMount{{HostPath: data, SandboxPath: "/workspace/data", ReadOnly: true}}
	})
	res, err := s.ExecuteCommand(context.Background(), "cat data/f", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "nested", res.Stdout, res.Stderr)
}

func mkdir(t *testing.T, p string) string {
	require.NoError(t, os.MkdirAll(p, 0o755))
	return p
}
