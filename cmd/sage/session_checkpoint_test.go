//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionCheckpointCommands: the user's round trip through the CLI:
// checkpoint (an id), checkpoints (table and JSON), a rollback after rm -rf,
// a fork into a new session whose writes the parent never sees, the clear
// errors (unknown id, a session not running, a call without
// --checkpoints), and the host folder written back on stop.
func TestSessionCheckpointCommands(t *testing.T) {
	home := sessionHome(t)
	r := inSession(t, home, "ck", "", "echo one > f; mkdir d; ln -s f link", "--checkpoints")
	require.Zero(t, r.code, r.stderr)
	r = sage(t, home, "", "session", "checkpoint", "ck")
	require.Zero(t, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)
	require.True(t, strings.HasPrefix(id, "ck-"), id)

	r = inSession(t, home, "ck", "", "rm -rf ./*; echo two > g", "--checkpoints")
	require.Zero(t, r.code, r.stderr)
	r = sage(t, home, "", "session", "checkpoints", "ck", "--json")
	require.Zero(t, r.code, r.stderr)
	var list []struct {
		ID   string `json:"id"`
		Size int64  `json:"size"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID)
	r = sage(t, home, "", "session", "checkpoints", "ck")
	assert.Contains(t, r.stdout, id)

	r = sage(t, home, "", "session", "rollback", "ck", id)
	require.Zero(t, r.code, r.stderr)
	r = inSession(t, home, "ck", "", "cat f; readlink link; ls", "--checkpoints")
	assert.Equal(t, "one\nf\nd\nf\nlink\n", r.stdout, r.stderr)

	r = sage(t, home, "", "session", "fork", "ck", id, "ck2")
	require.Zero(t, r.code, r.stderr)
	r = inSession(t, home, "ck2", "", "cat f; echo fork > only-fork", "--checkpoints")
	assert.Equal(t, "one\n", r.stdout, r.stderr)
	r = inSession(t, home, "ck", "", "test -e only-fork && echo seen || echo unseen", "--checkpoints")
	assert.Equal(t, "unseen\n", r.stdout, r.stderr)

	r = sage(t, home, "", "session", "rollback", "ck", "ck-000000000000")
	assert.Equal(t, exitFailed, r.code)
	assert.Contains(t, r.stderr, "has no such checkpoint")
	r = sage(t, home, "", "session", "checkpoint", "nosuch")
	assert.Equal(t, exitFailed, r.code)
	assert.Contains(t, r.stderr, "is not running")
	r = inSession(t, home, "ck", "", "true")
	assert.NotZero(t, r.code)
	assert.Contains(t, r.stderr, "Checkpoints")
	r = sage(t, home, "", "session", "rollback", "ck")
	assert.Equal(t, exitUsage, r.code)

	r = sage(t, home, "", "session", "stop", "ck")
	require.Zero(t, r.code, r.stderr)
	b, err := os.ReadFile(filepath.Join(home, "sessions", "ck", "workspace", "f"))
	require.NoError(t, err, "stop wrote the live state back")
	assert.Equal(t, "one\n", string(b))
	_, err = os.Stat(filepath.Join(home, "sessions", "ck", "workspace", "g"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
