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

// TestAgentCheckpointTurns: the user's round trip of an agent's turns:
// sage agent --checkpoints (the scripted model: turn 1 writes fib.py,
// turn 2 runs it, turn 3 only reads), the TURN column, rollback --turn
// once a daemon serves the session, and the clear errors: a session not
// running, an unknown turn, a session whose checkpoints have no turn,
// a negative turn, --undo without checkpoints.
func TestAgentCheckpointTurns(t *testing.T) {
	home := sessionHome(t)
	r := sage(t, home, "", "agent", "--model", "scripted", "--mode", "local", "--checkpoints", "--session", "ag", "--trace=false")
	require.Zero(t, r.code, r.stderr)
	assert.Contains(t, r.stderr, "before the first turn (turn 0)")
	assert.Regexp(t, `checkpoint ck-[0-9a-f]+: after turn 3 \(no change\)`, r.stderr)
	ws := filepath.Join(home, "sessions", "ag", "workspace")
	_, err := os.Stat(filepath.Join(ws, "fib_output.txt"))
	require.NoError(t, err, "the run's files are in the host folder")

	r = sage(t, home, "", "session", "rollback", "ag", "--turn", "1")
	assert.Equal(t, exitFailed, r.code)
	assert.Contains(t, r.stderr, "is not running; fix: start it with sage exec --session ag --checkpoints")
	r = inSession(t, home, "ag", "", "ls", "--checkpoints")
	require.Zero(t, r.code, r.stderr)
	assert.Equal(t, "fib.py\nfib_output.txt\n", r.stdout)
	r = sage(t, home, "", "session", "checkpoints", "ag")
	require.Zero(t, r.code, r.stderr)
	assert.Regexp(t, `ID +TIME +SIZE +TURN +LAYERS +COST\n`, r.stdout)
	assert.Regexp(t, `ck-[0-9a-f]+ .* 2-3 +2 +[0-9]+\.[0-9]ms\n`, r.stdout)
	r = sage(t, home, "", "session", "checkpoints", "ag", "--json")
	require.Zero(t, r.code, r.stderr)
	var list []struct {
		Turns []int `json:"turns"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
	require.Len(t, list, 3)
	assert.Equal(t, [][]int{{0}, {1}, {2, 3}}, [][]int{list[0].Turns, list[1].Turns, list[2].Turns})

	r = sage(t, home, "", "session", "rollback", "ag", "--turn", "1")
	require.Zero(t, r.code, r.stderr)
	assert.Contains(t, r.stdout, "rolled back ag to turn 1")
	r = inSession(t, home, "ag", "", "ls", "--checkpoints")
	assert.Equal(t, "fib.py\n", r.stdout, r.stderr)
	r = sage(t, home, "", "session", "rollback", "ag", "--turn", "3")
	assert.Equal(t, exitFailed, r.code)
	assert.Contains(t, r.stderr, "agent turn 3 has no checkpoint: fix: pick a turn from 0 to 1")
	r = sage(t, home, "", "session", "rollback", "ag", "--turn", "-1")
	assert.Equal(t, exitUsage, r.code)
	r = sage(t, home, "", "session", "rollback", "ag", "ck-000000000000", "--turn", "1")
	assert.Equal(t, exitUsage, r.code, "an id or --turn, not both")

	r = inSession(t, home, "plain", "", "echo x > f", "--checkpoints")
	require.Zero(t, r.code, r.stderr)
	r = sage(t, home, "", "session", "rollback", "plain", "--turn", "0")
	assert.Equal(t, exitFailed, r.code)
	assert.Contains(t, r.stderr, "no checkpoint is of an agent turn; fix: run the agent with checkpoints (sage agent --checkpoints)")
	r = sage(t, home, "", "agent", "--model", "scripted", "--mode", "local", "--undo", "--session", "u", "--trace=false")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--undo needs checkpoints")
	r = sage(t, home, "", "agent", "--model", "scripted", "--mode", "passthrough", "--checkpoints", "--session", "p", "--trace=false")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "needs local mode, not passthrough")

	r = sage(t, home, "", "session", "stop", "ag")
	require.Zero(t, r.code, r.stderr)
	ents, err := os.ReadDir(ws)
	require.NoError(t, err)
	require.Len(t, ents, 1, "stop wrote turn 1's state back")
	assert.Equal(t, "fib.py", ents[0].Name())
}
