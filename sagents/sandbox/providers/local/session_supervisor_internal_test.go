//go:build linux

package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
)

// TestSessionStaleSupervisorNextToExecutableIsBypassed: a stale
// sage-supervisor found next to the executable (not named in the
// options) is refused after its handshake, and this program serves the
// session instead; the next session does not try it again.
func TestSessionStaleSupervisorNextToExecutableIsBypassed(t *testing.T) {
	stale, err := testenv.Build("./cmd/sage-supervisor", "sage-supervisor",
		"-ldflags=-X github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor.served=1")
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Link(stale, filepath.Join(dir, "sage-supervisor")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sage"), nil, 0o755))
	executable = func() (string, error) { return filepath.Join(dir, "sage"), nil }
	t.Cleanup(func() { executable = os.Executable })

	rtSession = true
	defer func() { rtSession = false }()
	prog, named := SessionOptions{}.supervisorProgram()
	require.Equal(t, filepath.Join(dir, "sage-supervisor"), prog, "the stale program next to the executable is not found: the test proves nothing")
	require.False(t, named)
	s := rtSandbox(t, nil)
	res := rtRun(t, s, "stat -L -c %s /run/sage/bin/sage-supervisor", sandbox.ExecOptions{})
	self0, _ := os.Stat(self)
	assert.Equal(t, strconv.FormatInt(self0.Size(), 10), strings.TrimSpace(res.Stdout), "the session is not served by this program")
	prog, _ = SessionOptions{}.supervisorProgram()
	assert.Empty(t, prog, "a refused supervisor is tried again")
}
