//go:build linux

package local_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newGvisorAt is a gVisor session sandbox over ws and rt with a fixed id,
// as a session daemon opens its session again after a restart.
func newGvisorAt(t *testing.T, ws, rt string, checkpoints bool) *sandbox.Sandbox {
	t.Helper()
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: rt, SandboxID: "gkill9",
		Local: sandbox.LocalConfig{Checkpoints: checkpoints, Isolation: sandbox.Isolation{Linux: sandbox.IsolationGvisor}}}
	s, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	return s
}

// TestGvisorSessionAfterKill9: a process running a gVisor session sandbox
// is killed with -9 (a session daemon, say); the next one that opens the
// same runtime directory and id runs commands (it failed on the killed
// one's bundle: "mkdir .../bundles/gkill9-1: file exists"), and leaves
// nothing of the killed one behind at its Close.
func TestGvisorSessionAfterKill9(t *testing.T) {
	if os.Getenv("SAGE_GKILL9_HELPER") != "" {
		t.Skip("the helper runs in TestGvisorKill9Helper")
	}
	requireGvisor(t)
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	killGvisorHelper(t, ws, rt, "plain")

	s := newGvisorAt(t, ws, rt, false)
	assert.Equal(t, "before\nafter\n", ckRun(t, s, "cat /workspace/before; echo after"))
	require.NoError(t, s.Close(context.Background()))
	assert.Empty(t, testenv.Processes("runsc", rt), "no runsc of either process is left")
	assert.NoDirExists(t, rt+"/gvisor", "the killed process's bundles and state are gone with the new one's")
}

// killGvisorHelper runs TestGvisorKill9Helper in mode over ws and rt,
// kills it with -9 once it is ready, waits for its runsc to go, and
// returns the checkpoint id it printed, if any.
func killGvisorHelper(t *testing.T, ws, rt, mode string) (id string) {
	t.Helper()
	h := testenv.StartHelper(t, "TestGvisorKill9Helper", "SAGE_GKILL9_HELPER="+mode+":"+ws+":"+rt)
	h.ReadUntil(func(line string) bool {
		if v, ok := strings.CutPrefix(line, "checkpoint "); ok {
			id = v
		}
		return line != "ready"
	})
	h.Kill9()
	deadline := time.Now().Add(10 * time.Second)
	for len(testenv.Processes("runsc", rt)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	return id
}

// TestGvisorCheckpointSurvivesKill9: a gVisor checkpoint (files and every
// process) taken by a process killed with -9 afterwards is found by the
// next process over the same runtime directory, and a rollback to it
// brings back its files and its processes (the loop counts on, /tmp is
// its); a checkpoint the kill cut short (no meta.json) is swept.
func TestGvisorCheckpointSurvivesKill9(t *testing.T) {
	if os.Getenv("SAGE_GKILL9_HELPER") != "" {
		t.Skip("the helper runs in TestGvisorKill9Helper")
	}
	requireGvisor(t)
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	id := killGvisorHelper(t, ws, rt, "checkpoint")
	require.NotEmpty(t, id, "the helper took no checkpoint")
	stray := rt + "/gvisor-checkpoints/ck-000000000000"
	require.NoError(t, os.MkdirAll(stray+"/ws", 0o700))

	s := newGvisorAt(t, ws, rt, true)
	defer s.Close(context.Background())
	ctx := context.Background()
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, sandbox.CheckpointID(id), list[0].ID)
	assert.Equal(t, "files+processes", list[0].Covers)
	assert.NoDirExists(t, stray, "a checkpoint without its meta.json is swept")
	assert.Equal(t, "after\n", ckRun(t, s, "cat /workspace/after; test -e /workspace/before || true"), "the host folder kept every write")
	require.NoError(t, s.Rollback(ctx, list[0].ID))
	assert.Equal(t, "before\nno\ntmp\n", ckRun(t, s, "cat /workspace/before; test -e /workspace/after || echo no; cat /tmp/t"))
	n := readCount(t, s)
	require.Eventually(t, func() bool { return readCount(t, s) > n }, 10*time.Second, 50*time.Millisecond, "the restored loop counts on")
	require.NoError(t, s.Close(ctx))
	assert.NoDirExists(t, rt+"/gvisor-checkpoints", "Close removes the checkpoints")
}

// TestGvisorKill9Helper is TestGvisorSessionAfterKill9's daemon: it runs
// a command in its session sandbox, says ready and waits to be killed.
func TestGvisorKill9Helper(t *testing.T) {
	v := os.Getenv("SAGE_GKILL9_HELPER")
	if v == "" {
		t.Skip("run by TestGvisorSessionAfterKill9")
	}
	mode, dirs, _ := strings.Cut(v, ":")
	ws, rt, _ := strings.Cut(dirs, ":")
	s := newGvisorAt(t, ws, rt, mode == "checkpoint")
	ckRun(t, s, "echo before > /workspace/before")
	if mode == "checkpoint" {
		ckRun(t, s, "echo tmp > /tmp/t && "+counter)
		require.Eventually(t, func() bool { return readCount(t, s) > 3 }, 10*time.Second, 50*time.Millisecond)
		cp, err := s.Checkpoint(context.Background())
		require.NoError(t, err)
		os.Stdout.WriteString("checkpoint " + string(cp.ID) + "\n")
		ckRun(t, s, "echo after > /workspace/after; rm /workspace/before")
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
}
