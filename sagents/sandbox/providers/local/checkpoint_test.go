//go:build linux

package local_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newCheckpointed is a local sandbox with checkpoints on (a bwrap session
// sandbox) over ws and rt (new temporary ones when empty).
func newCheckpointed(t testing.TB, ws, rt string) *sandbox.Sandbox {
	t.Helper()
	return newCheckpointedWith(t, ws, rt, nil)
}

// newCheckpointedWith is newCheckpointed with its configuration changed
// by edit first (when not nil).
func newCheckpointedWith(t testing.TB, ws, rt string, edit func(*sandbox.Config)) *sandbox.Sandbox {
	t.Helper()
	requireBwrap(t)
	if ws == "" {
		ws = sandboxtest.TempDir(t)
	}
	if rt == "" {
		rt = sandboxtest.TempDir(t)
	}
	fresh := false
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: rt, SandboxID: "ckpt-test",
		Local: sandbox.LocalConfig{Checkpoints: true, FreshPerCommand: &fresh, Isolation: sandbox.Isolation{Linux: sandbox.IsolationBwrap}}}
	if edit != nil {
		edit(&cfg)
	}
	s, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func ckRun(t testing.TB, s *sandbox.Sandbox, cmd string) string {
	t.Helper()
	res, err := s.ExecuteCommand(context.Background(), cmd, sandbox.ExecOptions{})
	require.NoError(t, err, cmd)
	require.True(t, res.Success, "%s: %s%s", cmd, res.Stdout, res.Stderr)
	return res.Stdout
}

// listing is every path of the workspace with its type, mode, size,
// link target and content hash, as a command sees it.
const listing = `cd /workspace && find . -mindepth 1 -printf '%p %y %m %s %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum`

const populate = `cd /workspace && mkdir -p src/deep .hidden && printf 'package main\n' > src/main.go &&
	head -c 100000 /dev/urandom > src/deep/blob && chmod 0640 src/deep/blob && printf '#!/bin/sh\necho hi\n' > run.sh &&
	chmod 0755 run.sh && ln -s src/main.go link && ln -s /etc/passwd abs && echo h > .hidden/x && chmod 0700 .hidden && mkfifo pipe`

// TestCheckpointRollbackAfterRmRf: the attack every coding agent meets,
// an rm -rf of the workspace; a rollback restores the exact bytes, modes
// and symlinks, as commands and the host's file operations both see, and
// the host folder holds the live state after Close.
func TestCheckpointRollbackAfterRmRf(t *testing.T) {
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	s := newCheckpointed(t, ws, rt)
	ctx := context.Background()
	ckRun(t, s, populate)
	want := ckRun(t, s, listing)
	require.Contains(t, want, "./link l 777")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Positive(t, cp.Size)

	ckRun(t, s, "cd /workspace && rm -rf ./* ./.hidden && echo wrong > new")
	require.Equal(t, "./new f 600 6 \n", strings.SplitAfter(ckRun(t, s, listing), "\n")[0])
	got, err := s.ReadFile(ctx, "new")
	require.NoError(t, err, "the host sees the live state")
	assert.Equal(t, "wrong\n", string(got))
	_, err = os.Stat(filepath.Join(ws, "new"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the host folder is the base: untouched until Close or Sync")

	require.NoError(t, s.Rollback(ctx, cp.ID))
	assert.Equal(t, want, ckRun(t, s, listing), "rollback restores every byte, mode and link")
	got, err = s.ReadFile(ctx, "src/main.go")
	require.NoError(t, err)
	assert.Equal(t, "package main\n", string(got))
	_, err = s.ReadFile(ctx, "new")
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// A host write lands in the live state, seen by the next command.
	require.NoError(t, s.WriteFile(ctx, "from-host", []byte("h\n"), sandbox.WriteOptions{}))
	assert.Equal(t, "h\n", ckRun(t, s, "cat /workspace/from-host"))

	require.NoError(t, s.Close(ctx))
	b, err := os.ReadFile(filepath.Join(ws, "src/deep/blob"))
	require.NoError(t, err)
	assert.Len(t, b, 100000)
	fi, err := os.Lstat(filepath.Join(ws, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
	l, err := os.Readlink(filepath.Join(ws, "link"))
	require.NoError(t, err)
	assert.Equal(t, "src/main.go", l)
	b, _ = os.ReadFile(filepath.Join(ws, "from-host"))
	assert.Equal(t, "h\n", string(b), "Close wrote the live state back")
	_, err = os.Stat(filepath.Join(ws, "new"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the rolled-back file is not written back")
	// This session's agent only (its argv[0] is in the runtime directory):
	// other packages' tests and other sessions run agents of their own.
	assert.Empty(t, testenv.Processes(filepath.Join(rt, "sage-layers")), "the agent is gone")
}

// TestCheckpointRefusedWhileWriterHoldsFile: a background writer keeps a
// file open for writing: the checkpoint is one clear error and changes
// nothing (no checkpoint, no layer); once it ended the checkpoint works.
func TestCheckpointRefusedWhileWriterHoldsFile(t *testing.T) {
	rt := sandboxtest.TempDir(t)
	s := newCheckpointed(t, "", rt)
	ctx := context.Background()
	ckRun(t, s, "echo a > /workspace/a")
	layersBefore := entries(t, filepath.Join(rt, "layers"))
	// The writer ends by itself: a command may not signal another's
	// processes (each has a Landlock domain of its own).
	// It opens the file in its own time: wait (10 s at most) until it
	// holds it, or the checkpoint may come first and succeed.
	pid := strings.TrimSpace(ckRun(t, s, "(exec sleep 4 >> /workspace/held) >/dev/null 2>&1 & w=$!; i=0; "+
		"until ls -l /proc/$w/fd 2>/dev/null | grep -q /workspace/held || [ $i -ge 1000 ]; do sleep 0.01; i=$((i+1)); done; echo $w"))
	_, err := s.Checkpoint(ctx)
	require.ErrorIs(t, err, sandbox.ErrCheckpointBusy)
	assert.Contains(t, err.Error(), "nothing changed")
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.Equal(t, layersBefore, entries(t, filepath.Join(rt, "layers")), "no layer made or dropped")
	assert.Equal(t, "a\n", ckRun(t, s, "echo more >> /workspace/a; head -1 /workspace/a"), "the workspace is still writable")

	ckRun(t, s, "while test -d /proc/"+pid+"; do sleep 0.05; done")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	list, err = s.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, cp.ID, list[0].ID)
}

func entries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestCheckpointBadInput: an unknown id, a rollback dropping later
// checkpoints (whose ids are then unknown), an unchanged workspace
// checkpointed for free, and a rollback of a closed sandbox: clear errors,
// no agent or layer left behind.
func TestCheckpointBadInput(t *testing.T) {
	rt := sandboxtest.TempDir(t)
	s := newCheckpointed(t, "", rt)
	ctx := context.Background()
	err := s.Rollback(ctx, "ck-000000000000")
	require.ErrorIs(t, err, sandbox.ErrUnknownCheckpoint)
	require.ErrorIs(t, err, fs.ErrNotExist)

	ckRun(t, s, "echo 1 > /workspace/f")
	a, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	same, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Zero(t, same.Size, "nothing changed: no layer")
	assert.Equal(t, a.Layers, same.Layers)
	ckRun(t, s, "echo 2 > /workspace/f")
	b, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, a.Layers+1, b.Layers)
	local.LayersFreedForTest(s.Driver().(*local.Sandbox)) // the spare layer made
	layers := len(entries(t, filepath.Join(rt, "layers")))

	require.NoError(t, s.Rollback(ctx, a.ID))
	assert.Equal(t, "1\n", ckRun(t, s, "cat /workspace/f"))
	assert.ErrorIs(t, s.Rollback(ctx, b.ID), sandbox.ErrUnknownCheckpoint, "dropped by the rollback")
	local.LayersFreedForTest(s.Driver().(*local.Sandbox))
	assert.Less(t, len(entries(t, filepath.Join(rt, "layers"))), layers, "the dropped layers are freed")
	list, _ := s.Checkpoints(ctx)
	assert.Len(t, list, 1, "the later ones, the unchanged one too, are dropped")
	require.NotEmpty(t, testenv.Processes(filepath.Join(rt, "sage-layers")), "control: the live session's agent is found by its path")

	require.NoError(t, s.Close(ctx))
	assert.ErrorIs(t, s.Rollback(ctx, a.ID), sandbox.ErrClosed)
	_, err = s.Checkpoint(ctx)
	assert.ErrorIs(t, err, sandbox.ErrClosed)
	assert.Empty(t, testenv.Processes(filepath.Join(rt, "sage-layers")), "the agent is gone")
	assert.Empty(t, testenv.Processes("bwrap", rt))
}

// TestCheckpointsOffOrUnsupported: a sandbox without checkpoints answers
// ErrUnsupported, naming the fix.
func TestCheckpointsOffOrUnsupported(t *testing.T) {
	s := newLocal(t, nil)
	_, err := s.Checkpoint(context.Background())
	require.ErrorIs(t, err, sandbox.ErrUnsupported)
	assert.Contains(t, err.Error(), "checkpoints: on")
}

// TestForkIsolated: a fork starts from the checkpoint; its writes are
// never seen by its parent, nor the parent's by it.
func TestForkIsolated(t *testing.T) {
	s := newCheckpointed(t, "", "")
	ctx := context.Background()
	ckRun(t, s, populate)
	want := ckRun(t, s, listing)
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	ckRun(t, s, "echo after > /workspace/after-checkpoint")

	dir := filepath.Join(sandboxtest.TempDir(t), "fork")
	f := forkIsolated(t, s, cp.ID, dir, listing, want, "/workspace", "run.sh")
	assert.Equal(t, "no\n", ckRun(t, f, "test -e /workspace/after-checkpoint && echo yes || echo no"))
	_, err = f.Checkpoint(ctx)
	require.NoError(t, err, "the fork has checkpoints of its own")

	_, err = s.Fork(ctx, cp.ID, dir)
	require.ErrorIs(t, err, fs.ErrExist, "a fork into a folder that is not empty")
}

// forkIsolated forks s's checkpoint id into dir and checks that the fork
// starts as want (list's output), and that under root neither the fork's
// writes (a new file, name removed) nor the parent's reach the other.
func forkIsolated(t *testing.T, s *sandbox.Sandbox, id sandbox.CheckpointID, dir, list, want, root, name string) *sandbox.Sandbox {
	t.Helper()
	ctx := context.Background()
	f, err := s.Fork(ctx, id, dir)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(ctx) })
	assert.Equal(t, want, ckRun(t, f, list), "the fork starts as the checkpoint")
	ckRun(t, f, "echo fork > "+root+"/fork-only; rm "+root+"/"+name)
	ckRun(t, s, "echo parent > "+root+"/parent-only")
	assert.Equal(t, "no\nyes\n", ckRun(t, s, "test -e "+root+"/fork-only && echo yes || echo no; test -e "+root+"/"+name+" && echo yes"))
	assert.Equal(t, "no\nno\n", ckRun(t, f, "test -e "+root+"/parent-only && echo yes || echo no; test -e "+root+"/"+name+" && echo yes || echo no"))
	return f
}

// TestCheckpointMergeKeepsState: past the layer limit the oldest layers
// are merged into a new base: the state and the later checkpoints stay,
// the merged ones expire, the stack stays short.
func TestCheckpointMergeKeepsState(t *testing.T) {
	defer local.SetMaxLayersForTest(4)()
	rt := sandboxtest.TempDir(t)
	s := newCheckpointed(t, "", rt)
	ctx := context.Background()
	var ids []sandbox.CheckpointID
	for i := range 7 {
		ckRun(t, s, "echo "+string(rune('a'+i))+" > /workspace/f"+string(rune('0'+i))+"; rm -f /workspace/f"+string(rune('0'+i-2))+
			"; echo "+string(rune('a'+i))+" > /tmp/t"+string(rune('0'+i))+"; rm -f /tmp/t"+string(rune('0'+i-2)))
		cp, err := s.Checkpoint(ctx)
		require.NoError(t, err)
		assert.Less(t, cp.Layers, 4)
		ids = append(ids, cp.ID)
	}
	assert.Equal(t, "f5\nf6\n", ckRun(t, s, "ls /workspace"))
	assert.ErrorIs(t, s.Rollback(ctx, ids[0]), sandbox.ErrUnknownCheckpoint, "merged away")
	require.NoError(t, s.Rollback(ctx, ids[5]))
	assert.Equal(t, "f4\nf5\n", ckRun(t, s, "ls /workspace"))
	assert.Equal(t, "t4\nt5\n", ckRun(t, s, "ls /tmp"), "the layers of /tmp are merged too")
	local.LayersFreedForTest(s.Driver().(*local.Sandbox))
	// At most 3 frozen layers, the base, the upper, the spare layer, the
	// two uppers of the overlays built ahead, tmp and the manifest's two
	// slots.
	assert.LessOrEqual(t, len(entries(t, filepath.Join(rt, "layers"))), 3+3+2+1+2, "merged layers are freed")
}

// TestCheckpointSurvivesKill9: the process holding the sandbox (a session
// daemon) is killed with -9 between checkpoints: a new one over the same
// folders lists the checkpoints, shows the state written up to the kill,
// and rolls back to a checkpoint.
func TestCheckpointSurvivesKill9(t *testing.T) {
	if os.Getenv("SAGE_CKPT_HELPER") != "" {
		t.Skip("the helper runs in TestCheckpointHelper")
	}
	requireBwrap(t)
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	h := testenv.StartHelper(t, "TestCheckpointHelper", "SAGE_CKPT_HELPER="+ws+":"+rt)
	var id string
	h.ReadUntil(func(line string) bool {
		if v, ok := strings.CutPrefix(line, "checkpoint "); ok {
			id = v
		}
		return line != "ready"
	})
	require.NotEmpty(t, id, "the helper took no checkpoint")
	h.Kill9()
	deadline := time.Now().Add(5 * time.Second)
	for len(testenv.Processes("bwrap", rt)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// A layer directory the manifest does not name (a spare layer made
	// ahead, a removal the kill cut short) is swept by the next start.
	stray := filepath.Join(rt, "layers", "999999")
	require.NoError(t, os.MkdirAll(filepath.Join(stray, "u"), 0o700))

	s := newCheckpointed(t, ws, rt)
	ctx := context.Background()
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, sandbox.CheckpointID(id), list[0].ID)
	assert.NoDirExists(t, stray, "swept")
	assert.Equal(t, "workspace", list[0].Covers, "its /tmp went with the killed session sandbox")
	assert.Equal(t, "covered\nafter\n", ckRun(t, s, "cat /workspace/covered /workspace/after"), "nothing written before the kill is lost")
	assert.Equal(t, "no\n", ckRun(t, s, "test -e /tmp/covered || echo no"), "a new session sandbox starts with an empty /tmp")
	ckRun(t, s, "echo new > /tmp/new")
	require.NoError(t, s.Rollback(ctx, list[0].ID))
	assert.Equal(t, "covered\nno\n", ckRun(t, s, "cat /workspace/covered; test -e /workspace/after || echo no; ls /tmp"),
		"a rollback to it empties /tmp, as the restart did")
}

// TestCheckpointHelper is TestCheckpointSurvivesKill9's daemon: it takes
// a checkpoint, writes after it, says ready and waits to be killed.
func TestCheckpointHelper(t *testing.T) {
	v := os.Getenv("SAGE_CKPT_HELPER")
	if v == "" {
		t.Skip("run by TestCheckpointSurvivesKill9")
	}
	ws, rt, _ := strings.Cut(v, ":")
	s := newCheckpointed(t, ws, rt)
	ckRun(t, s, "echo covered > /workspace/covered; echo covered > /tmp/covered")
	cp, err := s.Checkpoint(context.Background())
	require.NoError(t, err)
	ckRun(t, s, "echo after > /workspace/after")
	os.Stdout.WriteString("checkpoint " + string(cp.ID) + "\nready\n")
	time.Sleep(time.Minute)
}

// TestCheckpointsUnprivileged re-runs the checkpoint tests as an ordinary
// user.
func TestCheckpointsUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged")
	}
	requireBwrap(t)
	_, err := testenv.RunUnprivileged(t, []string{"-test.run", "^(TestCheckpoint.*|TestForkIsolated|TestRollbackRestoresSessionTmp)$", "-test.count=1"})
	require.NoError(t, err)
}

// TestCheckpointSurvivesSessionRestart: the session sandbox dies between
// commands (killed, or stopped when idle): the next command's new one
// mounts the same layers, so the files written before and the checkpoints
// are all there.
func TestCheckpointSurvivesSessionRestart(t *testing.T) {
	ws := sandboxtest.TempDir(t)
	s := newCheckpointed(t, ws, "")
	ctx := context.Background()
	ckRun(t, s, "echo covered > /workspace/a; echo covered > /tmp/a")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	require.Equal(t, "files", cp.Covers)
	ckRun(t, s, "echo after > /workspace/b")
	l, ok := s.Driver().(*local.Sandbox)
	require.True(t, ok)
	pid := l.SessionPID()
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	for l.SessionPID() != 0 { // the host saw it die (a command sent before would meet its EOF)
		time.Sleep(10 * time.Millisecond)
	}
	res, err := s.ExecuteCommand(ctx, "cat /workspace/a /workspace/b", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.True(t, res.SessionRestarted)
	assert.Equal(t, "covered\nafter\n", res.Stdout, res.Stderr)
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, "workspace", list[0].Covers, "its /tmp went with the session sandbox")
	require.NoError(t, s.Rollback(ctx, cp.ID))
	assert.Equal(t, "covered\nno\n", ckRun(t, s, "cat /workspace/a; test -e /workspace/b || echo no; ls /tmp"))
	cp2, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "files", cp2.Covers, "the new session sandbox's checkpoints cover its /tmp")
}

// TestCheckpointWithReaderInBackground: a background task that writes
// nothing (a server, a sleep with its directory in the workspace) does not
// stop a checkpoint; it keeps the frozen view of its directory, and the
// live workspace goes on.
func TestCheckpointWithReaderInBackground(t *testing.T) {
	s := newCheckpointed(t, "", "")
	ctx := context.Background()
	ckRun(t, s, "echo a > /workspace/a")
	task, err := s.StartBackground(ctx, "cd /workspace && sleep 30", sandbox.ExecOptions{})
	require.NoError(t, err)
	defer s.KillBackground(ctx, task.ID, true)
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	ckRun(t, s, "echo b > /workspace/b")
	require.NoError(t, s.Rollback(ctx, cp.ID))
	assert.Equal(t, "a\n", ckRun(t, s, "ls /workspace"))
}

// TestCheckpointCloseAndSyncStartAfresh: a write-back changes the folder
// the checkpoints are layers over, so Sync and Close drop them (a rollback
// would otherwise show later files); the next sandbox starts on the
// written-back folder with none, and its own checkpoints work.
func TestCheckpointCloseAndSyncStartAfresh(t *testing.T) {
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	s := newCheckpointed(t, ws, rt)
	ctx := context.Background()
	ckRun(t, s, "echo a > /workspace/a")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	ckRun(t, s, "echo b > /workspace/b")
	require.NoError(t, s.Sync(ctx))
	b, err := os.ReadFile(filepath.Join(ws, "b"))
	require.NoError(t, err, "sync wrote the live state back")
	assert.Equal(t, "b\n", string(b))
	assert.ErrorIs(t, s.Rollback(ctx, cp.ID), sandbox.ErrUnknownCheckpoint, "dropped by the sync")
	assert.Equal(t, "a\nb\n", ckRun(t, s, "ls /workspace"), "the live view did not change")
	ckRun(t, s, "rm /workspace/a; echo c > /workspace/c")
	require.NoError(t, s.Close(ctx))
	assert.Equal(t, []string{"manifest.json"}, entries(t, filepath.Join(rt, "layers")), "the layers are freed")

	s2 := newCheckpointed(t, ws, rt)
	list, err := s2.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.Equal(t, "b\nc\n", ckRun(t, s2, "ls /workspace"))
	cp2, err := s2.Checkpoint(ctx)
	require.NoError(t, err)
	ckRun(t, s2, "rm /workspace/b")
	require.NoError(t, s2.Rollback(ctx, cp2.ID))
	assert.Equal(t, "b\nc\n", ckRun(t, s2, "ls /workspace"))
}

// TestCheckpointedHostWriteFirst: a host WriteFile before any command
// starts the session sandbox as this process, not as the file-system uid
// the write itself runs with as root (the session's start ran on that
// thread: the runtime files were the sandbox uid's, and a program in a
// folder only root may enter, such as go test's, could not be found).
func TestCheckpointedHostWriteFirst(t *testing.T) {
	rt := sandboxtest.TempDir(t)
	s := newCheckpointed(t, "", rt)
	ctx := context.Background()
	require.NoError(t, s.WriteFile(ctx, "first.txt", []byte("before any command\n"), sandbox.WriteOptions{}))
	require.Equal(t, "before any command\n", ckRun(t, s, "cat /workspace/first.txt"))
	if os.Geteuid() != 0 {
		return
	}
	var wrong []string
	filepath.WalkDir(rt, func(p string, d fs.DirEntry, err error) error {
		if err != nil || strings.Contains(p, "/layers/") || filepath.Base(p) == "venv" {
			return nil // the layers and the venv are the sandbox's, as its uid
		}
		if fi, err := d.Info(); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
			wrong = append(wrong, p)
		}
		return nil
	})
	assert.Empty(t, wrong, "runtime files not owned by root")
}

// tmpListing is every path of the session's /tmp with its type, mode,
// size, link target and content hash, and /tmp's own mode.
const tmpListing = `cd /tmp && find . -mindepth 1 -printf '%p %y %m %s %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum; stat -c '%a' /tmp`

// TestRollbackRestoresSessionTmp: a checkpoint covers the session's /tmp
// as it covers the workspace: after the file there is changed, another
// removed and everything else under rm -rf, a rollback restores the
// exact bytes, modes, a symlink and a FIFO (the control: before the
// rollback the listing differs, so the comparison can fail); a fork
// starts from the checkpoint's /tmp, and neither sees the other's writes.
func TestRollbackRestoresSessionTmp(t *testing.T) {
	t.Parallel()
	s := newCheckpointed(t, "", "")
	ctx := context.Background()
	ckRun(t, s, `mkdir -p /tmp/d && head -c 50000 /dev/urandom > /tmp/d/blob && chmod 0640 /tmp/d/blob && echo one > /tmp/x &&
		chmod 0604 /tmp/x && ln -s d/blob /tmp/link && mkfifo /tmp/pipe && echo one > /workspace/f`)
	want := ckRun(t, s, tmpListing)
	require.Contains(t, want, "./link l 777 6 d/blob")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "files", cp.Covers, "the workspace and /tmp")
	assert.Greater(t, cp.Size, int64(50000), "the bytes of /tmp count")

	ckRun(t, s, "echo two > /tmp/x && chmod 0600 /tmp/x && rm /tmp/link && rm -rf /tmp/* && echo new > /tmp/new && echo two > /workspace/f")
	require.NotEqual(t, want, ckRun(t, s, tmpListing), "control: /tmp changed")
	res, err := s.Restore(ctx, cp.ID)
	require.NoError(t, err)
	assert.Empty(t, res.Restored, "no process state without a kernel")
	assert.Equal(t, want, ckRun(t, s, tmpListing), "the session's /tmp is restored")
	assert.Equal(t, "one\n", ckRun(t, s, "cat /workspace/f"), "the workspace too")

	dir := filepath.Join(sandboxtest.TempDir(t), "fork")
	f := forkIsolated(t, s, cp.ID, dir, tmpListing, want, "/tmp", "x")
	fcp, err := f.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "files", fcp.Covers)
	ckRun(t, f, "rm -rf /tmp/*")
	require.NoError(t, f.Rollback(ctx, fcp.ID))
	assert.Equal(t, "fork\n", ckRun(t, f, "cat /tmp/fork-only"), "the fork's own checkpoint of /tmp")
	resolved, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	_, err = os.Stat(local.ForkSeedForTest(resolved))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the fork took its seed")

	// Export alone (sage session fork) leaves the seed (the control), which
	// the first sandbox opened on the folder later takes.
	dir2 := filepath.Join(sandboxtest.TempDir(t), "later")
	require.NoError(t, s.Export(ctx, cp.ID, dir2))
	resolved, err = filepath.EvalSymlinks(dir2)
	require.NoError(t, err)
	_, err = os.Stat(local.ForkSeedForTest(resolved))
	require.NoError(t, err, "Export left the fork's /tmp")
	later := newCheckpointed(t, dir2, "")
	assert.Equal(t, want, ckRun(t, later, tmpListing), "a sandbox opened on the folder later starts from it")
	_, err = os.Stat(local.ForkSeedForTest(resolved))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestTmpBoundWithCheckpoints: /tmp keeps its size bound with its layers,
// and the frozen ones count against it: 20 MB fit a 32 MB /tmp, and fit
// again after they were removed (the control, no checkpoint), but not
// once a checkpoint holds the first 20. The bound follows the memory
// limit, which needs a writable cgroup: TestCheckpointsUnprivileged does
// not re-run it (its name is outside that run's pattern).
func TestTmpBoundWithCheckpoints(t *testing.T) {
	t.Parallel()
	s := newCheckpointedWith(t, "", "", func(c *sandbox.Config) { c.Local.MemoryLimitMB = 64 }) // /tmp: 32 MB
	ctx := context.Background()
	const fill = "head -c 20000000 /dev/zero > /tmp/big && echo fits || echo full"
	assert.Equal(t, "full\n", ckRun(t, s, "head -c 40000000 /dev/zero > /tmp/big 2>/dev/null && echo fits || echo full; rm -f /tmp/big"))
	assert.Equal(t, "fits\n", ckRun(t, s, fill))
	assert.Equal(t, "fits\n", ckRun(t, s, "rm /tmp/big; "+fill), "control: without a checkpoint the space is free again")
	_, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "full\n", ckRun(t, s, "rm /tmp/big; "+fill+" 2>/dev/null; rm -f /tmp/big"), "the checkpoint holds the first 20 MB")
}

// TestCheckpointTmpWithMountUnder: a session sandbox with a mount under
// /tmp keeps its plain /tmp (an overlay there would hide the mount): the
// mount stays visible and its checkpoints say they cover the workspace
// only, while a sandbox without one (the control) covers both.
func TestCheckpointTmpWithMountUnder(t *testing.T) {
	t.Parallel()
	host := sandboxtest.TempDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(host, "seen"), []byte("mounted\n"), 0o644))
	require.NoError(t, os.Chmod(host, 0o755))
	s := newCheckpointedWith(t, "", "", func(c *sandbox.Config) {
		c.Mounts = []sandbox.VolumeMount{{HostPath: host, SandboxPath: "/tmp/m", ReadOnly: true}}
	})
	ctx := context.Background()
	assert.Equal(t, "mounted\n", ckRun(t, s, "cat /tmp/m/seen"))
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "workspace", cp.Covers)
	ckRun(t, s, "echo x > /tmp/x")
	require.NoError(t, s.Rollback(ctx, cp.ID))
	assert.Equal(t, "mounted\nx\n", ckRun(t, s, "cat /tmp/m/seen /tmp/x"), "the mount is there; /tmp is not rolled back")

	control, err := newCheckpointed(t, "", "").Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "files", control.Covers)
}

// TestCheckpointRefusedWhileWriterHoldsTmpFile: a background writer holds
// a file of /tmp open: a checkpoint (of a changed /tmp) and a rollback
// are one clear error that changes nothing, the workspace's freeze
// undone with it (it stays writable).
func TestCheckpointRefusedWhileWriterHoldsTmpFile(t *testing.T) {
	t.Parallel()
	s := newCheckpointed(t, "", "")
	ctx := context.Background()
	ckRun(t, s, "echo a > /workspace/a")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	ckRun(t, s, "(exec sleep 4 >> /tmp/held) >/dev/null 2>&1 & w=$!; i=0; "+
		"until ls -l /proc/$w/fd 2>/dev/null | grep -q /tmp/held || [ $i -ge 1000 ]; do sleep 0.01; i=$((i+1)); done; echo b > /workspace/b")
	_, err = s.Checkpoint(ctx)
	require.ErrorIs(t, err, sandbox.ErrCheckpointBusy)
	require.ErrorIs(t, s.Rollback(ctx, cp.ID), sandbox.ErrCheckpointBusy)
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1)
	assert.Equal(t, "b\nc\n", ckRun(t, s, "cat /workspace/b; echo c > /workspace/c; cat /workspace/c"), "the workspace is still writable")
}
