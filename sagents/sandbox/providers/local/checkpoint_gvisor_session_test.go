//go:build linux

package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newGvisorCheckpointed is a gVisor session sandbox with checkpoints on
// over new temporary ws and rt.
func newGvisorCheckpointed(t *testing.T) (s *sandbox.Sandbox, ws, rt string) {
	t.Helper()
	ws, rt = sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	return openGvisorCheckpointed(t, ws, rt), ws, rt
}

// openGvisorCheckpointed is a gVisor session sandbox with checkpoints on
// over ws, its runtime directory rt (closed at the test's end).
func openGvisorCheckpointed(t *testing.T, ws, rt string) *sandbox.Sandbox {
	t.Helper()
	requireGvisor(t)
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: rt, SandboxID: "gckpt-test",
		Local: sandbox.LocalConfig{Checkpoints: true, Isolation: sandbox.Isolation{Linux: sandbox.IsolationGvisor}}}
	s, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Close(context.Background())
		if t.Failed() { // what runsc and the supervisor said
			b, _ := os.ReadFile(filepath.Join(rt, "session.log"))
			t.Logf("session.log:\n%s", b)
		}
	})
	return s
}

// counter is a background loop counting in /tmp/n every 50 ms, its pid in
// /tmp/pid; its stdio is the sandbox's own (/dev/null), not the command's
// pipes from the host.
const counter = `sh -c 'echo $$ > /tmp/pid; i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.05; done' </dev/null >/dev/null 2>&1 &`

// readCount is the loop's count in /tmp/n (read again while the loop is
// between its truncation and its write).
func readCount(t *testing.T, s *sandbox.Sandbox) int {
	t.Helper()
	for range 50 {
		if n, err := strconv.Atoi(strings.TrimSpace(ckRun(t, s, "cat /tmp/n"))); err == nil {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("/tmp/n holds no count")
	return 0
}

// TestGvisorCheckpointRollback: a checkpoint of a gVisor session saves
// the workspace and every process with its memory and /tmp; after an rm
// -rf of the workspace, /tmp changed and the background loop killed, a
// rollback restores the exact bytes, modes and links, /tmp, and the loop,
// which counts on from where it was at the checkpoint. Commands work
// after it; the later checkpoint is dropped (its id unknown).
func TestGvisorCheckpointRollback(t *testing.T) {
	s, ws, _ := newGvisorCheckpointed(t)
	ctx := context.Background()
	ckRun(t, s, populate)
	ckRun(t, s, "echo secret > /tmp/t && chmod 0600 /tmp/t && "+counter)
	want := ckRun(t, s, listing)
	require.Contains(t, want, "./link l 777")
	require.Eventually(t, func() bool { return readCount(t, s) > 3 }, 10*time.Second, 50*time.Millisecond)

	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	atCkpt := readCount(t, s)
	assert.Equal(t, "files+processes", cp.Covers)
	assert.Equal(t, []string{"gvisor: all processes (the session sandbox's memory, /tmp included)"}, cp.Processes)
	assert.Positive(t, cp.Duration, "its cost is in the result")
	assert.Positive(t, cp.Size)
	t.Logf("checkpoint %v, %d bytes", cp.Duration, cp.Size)

	time.Sleep(time.Second) // the loop counts on: about 20 more
	ckRun(t, s, "cd /workspace && rm -rf ./* ./.hidden && echo wrong > new; rm /tmp/t; kill $(cat /tmp/pid)")
	killedAt := readCount(t, s)
	require.Greater(t, killedAt, atCkpt+5)
	later, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(ws, "new"))
	require.NoError(t, err, "the host folder is the live state")

	start := time.Now()
	require.NoError(t, s.Rollback(ctx, cp.ID))
	t.Logf("rollback %v", time.Since(start))
	assert.Equal(t, want, ckRun(t, s, listing), "rollback restores every byte, mode and link")
	assert.Equal(t, "secret\n600\n", ckRun(t, s, "cat /tmp/t; stat -c %a /tmp/t"), "/tmp is the checkpoint's")
	n := readCount(t, s)
	assert.GreaterOrEqual(t, n, atCkpt-1)
	assert.Less(t, n, killedAt, "the loop was restored from the checkpoint, not left running")
	assert.Eventually(t, func() bool { return readCount(t, s) > n+3 }, 10*time.Second, 50*time.Millisecond,
		"the restored loop counts on")
	got, err := s.ReadFile(ctx, "src/main.go")
	require.NoError(t, err, "the host's file operations see the rolled-back state")
	assert.Equal(t, "package main\n", string(got))
	_, err = os.Stat(filepath.Join(ws, "new"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	err = s.Rollback(ctx, later.ID)
	assert.ErrorIs(t, err, driver.ErrUnknownCheckpoint, "the rollback dropped the later checkpoint")
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, cp.ID, list[0].ID)

	// The same checkpoint again, after new changes: the image is reused.
	ckRun(t, s, "rm -rf /workspace/src; kill $(cat /tmp/pid)")
	require.NoError(t, s.Rollback(ctx, cp.ID))
	assert.Equal(t, want, ckRun(t, s, listing))
	n = readCount(t, s)
	assert.Eventually(t, func() bool { return readCount(t, s) > n+3 }, 10*time.Second, 50*time.Millisecond)
}

// TestGvisorCheckpointBadInput: an unknown id, a checkpoint while a
// command runs, a rollback of a closed sandbox: clear errors; a process
// left in the background holding its command's stdio or a background
// task makes the checkpoint files-only;
// the oldest checkpoint is dropped past the bound; Close leaves no runsc
// sandbox or process, no mount, no image or copy.
func TestGvisorCheckpointBadInput(t *testing.T) {
	s, ws, rt := newGvisorCheckpointed(t)
	ctx := context.Background()
	ckRun(t, s, "echo a > /workspace/a")
	err := s.Rollback(ctx, "ck-nope")
	assert.ErrorIs(t, err, driver.ErrUnknownCheckpoint)
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A command running: refused, as under bwrap.
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ExecuteCommand(ctx, "touch /workspace/running; sleep 3", sandbox.ExecOptions{})
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(ws, "running")); return err == nil }, 10*time.Second, 20*time.Millisecond)
	_, err = s.Checkpoint(ctx)
	assert.ErrorIs(t, err, driver.ErrCommandRunning, "a command runs")
	<-done
	dirs, err := os.ReadDir(filepath.Join(rt, "gvisor-checkpoints"))
	require.NoError(t, err)
	assert.Empty(t, dirs, "the refused checkpoint left no image or copy")

	// A process left in the background with the command's stdio (pipes
	// from the host): runsc checkpoint cannot save it; the checkpoint is
	// of the files only, the session goes on, and once it ended the
	// checkpoint saves the processes again.
	ckRun(t, s, `sh -c 'echo $$ > /tmp/p; while :; do date > /tmp/d; sleep 0.1; done' &`)
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "files", cp.Covers)
	assert.Empty(t, cp.Processes)
	_, err = os.Stat(filepath.Join(rt, "gvisor-checkpoints", string(cp.ID), "image"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the failed image is removed")
	ckRun(t, s, "kill $(cat /tmp/p)")
	require.Eventually(t, func() bool {
		cp, err = s.Checkpoint(ctx)
		return err == nil && cp.Covers == "files+processes"
	}, 20*time.Second, 100*time.Millisecond, "once it ended: %v %v", cp, err)

	var ids []sandbox.CheckpointID
	for range 9 {
		cp, err := s.Checkpoint(ctx)
		require.NoError(t, err)
		ids = append(ids, cp.ID)
	}
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 8, "at most 8 are kept")
	assert.Equal(t, ids[1], list[0].ID, "the oldest were dropped")
	dirs, err = os.ReadDir(filepath.Join(rt, "gvisor-checkpoints"))
	require.NoError(t, err)
	assert.Len(t, dirs, 8, "a dropped checkpoint's image and copy are removed")

	require.NoError(t, s.Close(ctx))
	err = s.Rollback(ctx, ids[8])
	assert.ErrorIs(t, err, driver.ErrClosed)
	for _, d := range []string{"gvisor", "gvisor-checkpoints"} {
		_, err = os.Stat(filepath.Join(rt, d))
		assert.ErrorIs(t, err, os.ErrNotExist, "runsc's state, the images and copies are removed")
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), rt, "no mount is left")
	out, _ := exec.Command("pgrep", "-f", "gckpt-test").Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "no runsc process is left")
}

// TestGvisorCheckpointFork: a fork of a gVisor checkpoint is a new
// session whose workspace is a copy of the checkpoint's files (files
// only: its processes are its own); its writes are never the parent's.
func TestGvisorCheckpointFork(t *testing.T) {
	s, _, _ := newGvisorCheckpointed(t)
	ctx := context.Background()
	ckRun(t, s, "echo one > /workspace/f && ln -s f /workspace/l")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	ckRun(t, s, "echo two > /workspace/f")
	dir := filepath.Join(sandboxtest.TempDir(t), "fork")
	f, err := s.Fork(ctx, cp.ID, dir)
	require.NoError(t, err)
	defer f.Close(ctx)
	assert.Equal(t, "one\nf\n", ckRun(t, f, "cat /workspace/f; readlink /workspace/l"))
	ckRun(t, f, "echo fork > /workspace/f")
	assert.Equal(t, "two\n", ckRun(t, s, "cat /workspace/f"), "the parent never sees the fork's writes")
	_, err = f.Checkpoint(ctx)
	require.NoError(t, err, "the fork has checkpoints of its own")
}

// TestGvisorCheckpointFilesOnly (issue 33): while a background task runs
// (its stdio are pipes from the host, which gVisor cannot save) a
// checkpoint of a gVisor session is of the files only; a rollback to it
// restores the workspace without restarting the sandbox: the task runs
// on. A rollback to a checkpoint of every process is refused while the
// task runs (it would end it); once it ended, checkpoints save every
// process again.
func TestGvisorCheckpointFilesOnly(t *testing.T) {
	s, ws, rt := newGvisorCheckpointed(t)
	ctx := context.Background()
	full, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	require.Equal(t, "files+processes", full.Covers)
	// The FIFO populate makes lives in gVisor's memory only (never on the
	// host folder): a files-only checkpoint cannot have it.
	ckRun(t, s, populate+" && rm pipe")
	want := ckRun(t, s, listing)
	ckRun(t, s, counter)
	task, err := s.StartBackground(ctx, "sleep 30", sandbox.ExecOptions{})
	require.NoError(t, err)

	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err, "a background task runs")
	assert.Equal(t, "files", cp.Covers)
	assert.Empty(t, cp.Processes)
	_, err = os.Stat(filepath.Join(rt, "gvisor-checkpoints", string(cp.ID), "image"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no image")
	t.Logf("files-only checkpoint %v, %d bytes", cp.Duration, cp.Size)

	ckRun(t, s, "cd /workspace && rm -rf ./* ./.hidden && echo wrong > new")
	atRm := readCount(t, s)
	later, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, s.Rollback(ctx, cp.ID))
	t.Logf("files-only rollback %v", time.Since(start))
	assert.Equal(t, want, ckRun(t, s, listing), "rollback restores every byte, mode and link")
	_, err = os.Stat(filepath.Join(ws, "new"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	st, err := s.BackgroundStatus(ctx, task.ID)
	require.NoError(t, err)
	assert.True(t, st.Alive, "the task runs on: the sandbox was not restarted")
	assert.GreaterOrEqual(t, readCount(t, s), atRm, "the loop went on, not restored")
	assert.ErrorIs(t, s.Rollback(ctx, later.ID), driver.ErrUnknownCheckpoint, "the later checkpoint is dropped")

	err = s.Rollback(ctx, full.ID)
	assert.ErrorIs(t, err, driver.ErrCommandRunning, "restoring every process would end the task")
	assert.Contains(t, err.Error(), "fix: ")
	assert.Equal(t, want, ckRun(t, s, listing), "the refused rollback changed nothing")

	require.NoError(t, s.KillBackground(ctx, task.ID, true))
	ckRun(t, s, "kill $(cat /tmp/pid)")
	require.Eventually(t, func() bool {
		cp, err = s.Checkpoint(ctx)
		return err == nil && cp.Covers == "files+processes"
	}, 20*time.Second, 100*time.Millisecond, "once it ended: %v %v", cp, err)
	require.NoError(t, s.Rollback(ctx, full.ID))
	assert.Equal(t, "", ckRun(t, s, "ls -A /workspace"))
}

// TestGvisorCheckpointTurnsOutliveClose: as under bwrap, the checkpoints
// of agent turns outlive Close (for `sage session rollback --turn` after
// the run): the next sandbox over the runtime directory lists them and
// rolls back to a turn's files and, from its image, its processes. The
// host folder keeps the live state at Close. Plain checkpoints do not
// outlive it (TestGvisorCheckpointBadInput).
func TestGvisorCheckpointTurnsOutliveClose(t *testing.T) {
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	ctx := context.Background()
	s := openGvisorCheckpointed(t, ws, rt)
	ckRun(t, s, "echo base > /workspace/base")
	c0, err := s.CheckpointTurn(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, c0.Turns)
	ckRun(t, s, "echo one > /workspace/one; echo tmp1 > /tmp/t; "+counter)
	require.Eventually(t, func() bool { return readCount(t, s) > 3 }, 10*time.Second, 50*time.Millisecond)
	c1, err := s.CheckpointTurn(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "files+processes", c1.Covers)
	atCkpt := readCount(t, s)
	ckRun(t, s, "rm /workspace/one; echo two > /workspace/two; kill $(cat /tmp/pid)")
	require.NoError(t, s.Close(ctx))
	b, err := os.ReadFile(filepath.Join(ws, "two"))
	require.NoError(t, err, "the host folder has the live state at Close")
	assert.Equal(t, "two\n", string(b))

	s2 := openGvisorCheckpointed(t, ws, rt)
	list, err := s2.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "the turns outlived Close")
	assert.Equal(t, "base\ntwo\n", ckRun(t, s2, "cd /workspace && cat base two && ls /tmp/t 2>/dev/null || true"),
		"it starts in the state Close left")
	cp, err := s2.RollbackTurn(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, c1.ID, cp.ID)
	assert.Equal(t, "base\none\ntmp1\n", ckRun(t, s2, "cd /workspace && ls && cat /tmp/t"),
		"turn 1's files and /tmp")
	n := readCount(t, s2)
	assert.GreaterOrEqual(t, n, atCkpt-1)
	assert.Eventually(t, func() bool { return readCount(t, s2) > n+3 }, 10*time.Second, 50*time.Millisecond,
		"turn 1's loop, restored from its image, counts on")
	cp, err = s2.RollbackTurn(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, c0.ID, cp.ID)
	assert.Equal(t, "base\n", ckRun(t, s2, "ls /workspace; ls /tmp/pid 2>/dev/null || true"), "turn 0 had no loop")
	require.NoError(t, s2.Close(ctx))
	ents, err := os.ReadDir(ws)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	assert.Equal(t, "base", ents[0].Name(), "the folder holds turn 0's state")
}
