//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A background task has a CLI (issue 37, item 6): sage task status,
// output (from an offset, or followed to its end) and kill, on the
// session that runs it.
func TestTaskCLI(t *testing.T) {
	home := sessionHome(t)
	r := inSession(t, home, "tk", "", "echo one; sleep 1; echo two; exec sleep 313", "--background")
	require.Equal(t, 0, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)
	require.NotEmpty(t, id)
	task := func(args ...string) cliRun {
		return sage(t, home, "", append(append([]string{"task"}, args...), "--session", "tk", id)...)
	}
	r = task("status")
	assert.Equal(t, "running\n", r.stdout, r.stderr)
	require.Eventually(t, func() bool { return task("output").stdout == "one\ntwo\n" }, 30*time.Second, 100*time.Millisecond)
	r = task("output", "--offset", "4")
	assert.Equal(t, "two\n", r.stdout)
	r = task("status", "--json")
	var st struct {
		ID    string `json:"task_id"`
		Alive bool   `json:"alive"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	assert.Equal(t, id, st.ID)
	assert.True(t, st.Alive)
	r = task("kill")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "killed "+id+"\n", r.stdout)
	r = task("status")
	assert.Equal(t, "killed by SIGTERM\n", r.stdout, r.stderr)
	assert.Empty(t, running("sleep 313"), "its process is gone")

	r = inSession(t, home, "tk", "", "echo a; sleep 2; echo b; exit 3", "--background")
	require.Equal(t, 0, r.code, r.stderr)
	id = strings.TrimSpace(r.stdout)
	r = task("output", "--follow")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "a\nb\n", r.stdout, "followed to the task's end")
	assert.Equal(t, "exited 3\n", task("status").stdout)

	id = "nosuch"
	r = task("status")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "sage task status: session tk has no task nosuch (sage exec --session tk --background printed the ids of its tasks)\n", r.stderr)
}
