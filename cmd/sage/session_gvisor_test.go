//go:build linux

package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// TestSessionUnderGvisor: `sage exec --isolation gvisor --session S` run
// twice reaches the same gVisor session sandbox through its daemon (the
// second command line sees the first one's /tmp, on gVisor's kernel), and
// `sage session stop` ends it.
func TestSessionUnderGvisor(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (isolation gvisor runs runsc as root)", "run the tests as root")
	}
	testenv.Command(t, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
	home := sessionHome(t)
	r := inSession(t, home, "gv", "", "echo kept > /tmp/f; cat /proc/version", "--isolation", "gvisor")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, strings.ToLower(r.stdout), "gvisor")
	r = inSession(t, home, "gv", "", "cat /tmp/f", "--isolation", "gvisor")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "kept\n", r.stdout, "the second command line runs in the same gVisor session")
	rows := sessionLsJSON(t, home)
	require.Len(t, rows, 1)
	assert.Equal(t, "gv", rows[0].Session)
	r = sage(t, home, "", "session", "stop", "gv")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, sessionLsJSON(t, home))
}

// TestAgentCheckpointTurnsGvisor: the agent's turns under gVisor, as a
// user runs them: sage agent --checkpoints --isolation gvisor, then, once
// a daemon serves the session, sage session checkpoints lists the turns
// (they outlived the agent's Close) and rollback --turn 1 brings back turn
// 1's files (the scripted model: turn 1 writes fib.py, turn 2 runs it).
func TestAgentCheckpointTurnsGvisor(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (isolation gvisor runs runsc as root)", "run the tests as root")
	}
	testenv.Command(t, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
	home := sessionHome(t)
	gv := []string{"--isolation", "gvisor", "--checkpoints"}
	r := sage(t, home, "", append([]string{"agent", "--model", "scripted", "--mode", "local", "--session", "ag", "--trace=false"}, gv...)...)
	require.Zero(t, r.code, r.stderr)
	assert.Contains(t, r.stderr, "before the first turn (turn 0)")
	r = inSession(t, home, "ag", "", "ls", gv...)
	require.Zero(t, r.code, r.stderr)
	assert.Equal(t, "fib.py\nfib_output.txt\n", r.stdout)
	r = sage(t, home, "", "session", "checkpoints", "ag", "--json")
	require.Zero(t, r.code, r.stderr)
	var list []struct {
		Turns  []int  `json:"turns"`
		Covers string `json:"covers"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
	require.GreaterOrEqual(t, len(list), 2, "the turns outlived the agent's run")
	assert.Equal(t, []int{1}, list[1].Turns)
	assert.Equal(t, "files+processes", list[1].Covers)
	r = sage(t, home, "", "session", "rollback", "ag", "--turn", "1")
	require.Zero(t, r.code, r.stderr)
	assert.Contains(t, r.stdout, "rolled back ag to turn 1")
	r = inSession(t, home, "ag", "", "ls", gv...)
	assert.Equal(t, "fib.py\n", r.stdout, r.stderr)
	r = sage(t, home, "", "session", "stop", "ag")
	assert.Zero(t, r.code, r.stderr)
}
