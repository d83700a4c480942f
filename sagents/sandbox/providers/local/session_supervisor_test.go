//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// sessionSupervisor, when set, is the SessionOptions.Supervisor of every
// session sandbox newSession makes that names none
// (TestSessionOwnSupervisor sets it to cmd/sage-supervisor).
var sessionSupervisor string

// ownSupervisor builds cmd/sage-supervisor (once per test binary).
func ownSupervisor(t testing.TB) string {
	t.Helper()
	bin, err := testenv.SupervisorBinary()
	require.NoError(t, err)
	return bin
}

// useOwnSupervisor makes newSession's sandboxes run cmd/sage-supervisor
// for the rest of t.
func useOwnSupervisor(t *testing.T) {
	sessionSupervisor = ownSupervisor(t)
	t.Cleanup(func() { sessionSupervisor = "" })
}

// servedSupervisor is the size of the program a command of s finds bound
// as its session's supervisor.
func servedSupervisor(t *testing.T, s *local.Sandbox) int64 {
	t.Helper()
	res := sh(t, s, "stat -L -c %s /run/sage/bin/sage-supervisor", sandbox.ExecOptions{})
	n, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
	require.NoError(t, err, "stdout %q stderr %q", res.Stdout, res.Stderr)
	return n
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// TestSessionOwnSupervisor reruns the session tests, the session escape
// suite and the control channel's with cmd/sage-supervisor as the
// supervisor, first checking that it is the program that serves.
func TestSessionOwnSupervisor(t *testing.T) {
	useOwnSupervisor(t)
	t.Run("ServesTheSession", testOwnSupervisorServes)
	runSessionTests(t, append(sessionTests[:len(sessionTests):len(sessionTests)],
		sessionTest{"EscapeSuite", TestSessionEscapeSuite},
		sessionTest{"ControlChannelIsOutOfReach", TestSessionControlChannelIsOutOfReach}))
}

// TestGvisorSessionOwnSupervisor: a gVisor session sandbox runs
// cmd/sage-supervisor too.
func TestGvisorSessionOwnSupervisor(t *testing.T) {
	useGvisorSessions(t)
	useOwnSupervisor(t)
	t.Run("ServesTheSession", testOwnSupervisorServes)
	runSessionTests(t, sessionTests[:3])
}

func testOwnSupervisorServes(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	small := fileSize(t, sessionSupervisor)
	self, err := os.Executable()
	require.NoError(t, err)
	require.NotEqual(t, small, fileSize(t, self), "the test binary and cmd/sage-supervisor have the same size: the check below proves nothing")
	assert.Equal(t, small, servedSupervisor(t, s), "the session is not served by %s", sessionSupervisor)
	res := sh(t, s, "echo kept > /tmp/f", sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	assert.Equal(t, "kept\n", sh(t, s, "cat /tmp/f", sandbox.ExecOptions{}).Stdout)
}

// TestSessionSupervisorDefaultIsThisProgram: with no sage-supervisor
// next to the executable (the test binary's directory has none), the
// session re-executes this program as its supervisor.
func TestSessionSupervisorDefaultIsThisProgram(t *testing.T) {
	s := newSession(t, local.SessionOptions{Supervisor: ""}, nil)
	self, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, fileSize(t, self), servedSupervisor(t, s))
	s = newSession(t, local.SessionOptions{Supervisor: local.SupervisorSelf}, nil)
	assert.Equal(t, fileSize(t, self), servedSupervisor(t, s))
}

// staleSupervisor builds cmd/sage-supervisor answering protocol 1, as a
// sage-supervisor left from an older build would.
func staleSupervisor(t testing.TB) string {
	t.Helper()
	bin, err := testenv.Build("./cmd/sage-supervisor", "sage-supervisor",
		"-ldflags=-X github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor.served=1")
	require.NoError(t, err)
	return bin
}

// TestSessionSupervisorRefused: a named supervisor program that is stale
// (another protocol) or not a supervisor at all fails the command with an
// error naming it and the fix, and runs nothing; a relative path is
// refused when the sandbox opens. Control: the current build serves.
func TestSessionSupervisorRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ prog, want string }{
		{staleSupervisor(t), fmt.Sprintf("the host speaks protocol %d, this build 1", supervisor.Protocol)},
		{"/bin/true", "ended before it served"},
	} {
		s := newSession(t, local.SessionOptions{Supervisor: tc.prog}, nil)
		res, err := s.Exec(ctx, driver.ExecSpec{Command: "echo RAN > ran"})
		require.Error(t, err, "%s served: %+v", tc.prog, res)
		assert.ErrorContains(t, err, tc.prog)
		assert.ErrorContains(t, err, tc.want)
		assert.ErrorContains(t, err, "fix:")
		assert.NoFileExists(t, s.HostWorkspacePath()+"/ran", "a refused supervisor ran the command")
	}
	s := newSession(t, local.SessionOptions{Supervisor: ownSupervisor(t)}, nil)
	assert.Equal(t, "ok\n", sh(t, s, "echo ok", sandbox.ExecOptions{}).Stdout)

	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	_, err := local.NewWithOptions(ctx, cfg, local.Options{Session: local.SessionOptions{Enabled: true, Supervisor: "bin/sage-supervisor"}})
	assert.ErrorContains(t, err, "bin/sage-supervisor")
}
