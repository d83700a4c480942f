//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// TestMCPCheckpointTools: sage mcp --checkpoints gives the host the
// checkpoint, checkpoints, rollback and fork tools (and without
// checkpoints none of them); an rm -rf is rolled back, a fork lands in a
// new session's workspace, and bad input is a tool error with its code.
func TestMCPCheckpointTools(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home := sandboxtest.TempDir(t)
	cs, logs := mcpStdio(t, []string{"SAGE_SANDBOX_MODE=", "SAGE_HOME=" + home}, "--mode", "local", "--session", "m1", "--checkpoints")
	names := listedNames(t, cs)
	for _, n := range []string{"checkpoint", "checkpoints", "rollback", "fork"} {
		assert.Contains(t, names, n)
	}
	assert.NotContains(t, names, "undo", "undo is the agent's, and off unless asked for")

	text, code := callTool(t, cs, "execute_shell_command", map[string]any{"command": "echo one > f"})
	require.Empty(t, code, "%s\nlog:\n%s", text, logs.String())
	text, code = callTool(t, cs, "checkpoint", map[string]any{})
	require.Empty(t, code, text)
	id := strings.Fields(text)[1]
	require.True(t, strings.HasPrefix(id, "ck-"), text)
	text, code = callTool(t, cs, "execute_shell_command", map[string]any{"command": "rm -rf ./*"})
	require.Empty(t, code, text)
	text, code = callTool(t, cs, "checkpoints", map[string]any{})
	require.Empty(t, code, text)
	assert.Contains(t, text, `"id":"`+id+`"`)
	text, code = callTool(t, cs, "rollback", map[string]any{"id": id})
	require.Empty(t, code, text)
	text, code = callTool(t, cs, "file_read", map[string]any{"path": "f"})
	require.Empty(t, code, text)
	assert.Contains(t, text, "one")

	_, code = callTool(t, cs, "rollback", map[string]any{"id": "ck-000000000000"})
	assert.Equal(t, tools.CodeNotFound, code)
	_, code = callTool(t, cs, "rollback", map[string]any{"turn": 2})
	assert.Equal(t, tools.CodeNotFound, code)
	_, code = callTool(t, cs, "rollback", map[string]any{})
	assert.Equal(t, tools.CodeInvalidArguments, code)

	text, code = callTool(t, cs, "fork", map[string]any{"id": id, "session": "m2"})
	require.Empty(t, code, text)
	b, err := os.ReadFile(filepath.Join(home, "sessions", "m2", "workspace", "f"))
	require.NoError(t, err, text)
	assert.Equal(t, "one\n", string(b))
	_, code = callTool(t, cs, "fork", map[string]any{"id": id, "session": "m2"})
	assert.Equal(t, tools.CodeInvalidArguments, code, "the fork's workspace is not empty")
	_, code = callTool(t, cs, "fork", map[string]any{"id": id, "session": "../x"})
	assert.Equal(t, tools.CodeInvalidArguments, code)
	_, err = os.Stat(filepath.Join(home, "sessions", "x"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	plain, _ := mcpStdio(t, []string{"SAGE_SANDBOX_MODE="}, "--mode", "local", "--session", "m3")
	assert.False(t, slices.Contains(listedNames(t, plain), "checkpoint"), "checkpoints off: no checkpoint tools")
}
