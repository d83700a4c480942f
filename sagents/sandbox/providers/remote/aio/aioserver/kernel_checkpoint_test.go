//go:build linux

package aioserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/spectest"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newCheckpointFixture serves a local sandbox with checkpoints on.
func newCheckpointFixture(t testing.TB) (*fixture, *sandbox.Sandbox) {
	t.Helper()
	testenv.Command(t, "bwrap", "install bubblewrap (apt-get install bubblewrap)")
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3)")
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	cfg.Local.Checkpoints = true
	return serveCheckpointed(t, cfg, "a local (bubblewrap) sandbox with checkpoints", "run on Linux 6.8+ with bubblewrap and user namespaces")
}

// newGvisorCheckpointFixture serves a local gVisor session sandbox with
// checkpoints on (runsc, as root).
func newGvisorCheckpointFixture(t testing.TB) (*fixture, *sandbox.Sandbox) {
	t.Helper()
	if os.Getenv("SAGE_TEST_UNPRIVILEGED") == "1" {
		t.Skip("isolation gvisor runs runsc as root; the unprivileged re-run checks bwrap")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (isolation gvisor runs runsc as root)", "run the tests as root")
	}
	testenv.Command(t, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3)")
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	cfg.Local.Checkpoints = true
	cfg.Local.Isolation.Linux = sandbox.IsolationGvisor
	return serveCheckpointed(t, cfg, "a local gVisor session sandbox with checkpoints", "run as root with runsc installed")
}

func serveCheckpointed(t testing.TB, cfg sandbox.Config, what, fix string) (*fixture, *sandbox.Sandbox) {
	t.Helper()
	h, srv, ts := serveLocal(t, cfg, what, fix)
	tt, _ := t.(*testing.T)
	f := &fixture{srv: srv, ts: ts, ws: h.WorkspacePath(), t: tt}
	if tt != nil {
		f.v = spectest.Load(tt)
		f.hc = &http.Client{Transport: f.v.Transport(tt, http.DefaultTransport), Timeout: 2 * time.Minute}
	}
	return f, h
}

// cell runs code in the jupyter session id and returns its final value
// (or the error's name), failing on a transport error.
func cell(t *testing.T, f *fixture, id, code string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"code": code, "session_id": id})
	st, m := f.post("/v1/jupyter/execute", string(body))
	require.Equal(t, http.StatusOK, st, "%v", m)
	d := data(t, m)
	if d["status"] != "ok" {
		for _, o := range d["outputs"].([]any) {
			if o := o.(map[string]any); o["output_type"] == "error" {
				return "error " + o["ename"].(string)
			}
		}
		return "error"
	}
	if r, ok := outputsOf(t, d)["execute_result"]; ok {
		return r["data"].(map[string]any)["text/plain"].(string)
	}
	return ""
}

// kernelCopies counts the processes holding a kernel's saved state (the
// fork template's copies name themselves sage-kcopy), seen from a
// command of the same session.
func kernelCopies(t *testing.T, h *sandbox.Sandbox) string {
	t.Helper()
	res, err := h.ExecuteCommand(context.Background(), "n=0; for c in /proc/[0-9]*/comm; do read -r x < $c 2>/dev/null && [ \"$x\" = sage-kcopy ] && n=$((n+1)); done; echo $n", sandbox.ExecOptions{})
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)
	return strings.TrimSpace(res.Stdout)
}

// The Python kernel's variables are checkpointed with the files and
// rolled back with them (issue 33, the fork template), under the same
// checkpoint ids: x = 1, checkpoint, x = 2, rollback: x == 1 and the file
// the kernel wrote is back too; a second rollback to the same id works;
// a checkpoint the rollback drops frees its copy, and Sync frees them
// all; a kernel started after the checkpoint (the control) is stopped by
// the rollback and says so.
func TestKernelCheckpointRollback(t *testing.T) {
	f, h := newCheckpointFixture(t)
	ctx := context.Background()
	assert.Equal(t, "", cell(t, f, "k", "x = 1\n_ = open('f.txt', 'w').write('one')"))
	cp, err := h.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"python kernel k"}, cp.Processes)
	assert.Equal(t, "files+processes", cp.Covers)
	assert.Equal(t, "1", kernelCopies(t, h), "one copy holds the checkpoint's state")

	assert.Equal(t, "", cell(t, f, "k", "x = 2\n_ = open('f.txt', 'w').write('two')"))
	assert.Equal(t, "2", cell(t, f, "k", "x"))
	assert.Equal(t, "error NameError", cell(t, f, "j", "x"), "the control: another session")
	res, err := h.Restore(ctx, cp.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"python kernel k"}, res.Restored)
	assert.Equal(t, []string{"python kernel j"}, res.Stopped, "a kernel with no state at the checkpoint is stopped")
	assert.Equal(t, "1", cell(t, f, "k", "x"), "the kernel's variables are the checkpoint's")
	assert.Equal(t, "'one'", cell(t, f, "k", "open('f.txt').read()"), "and the files, in the same rollback")
	assert.Equal(t, "error NameError", cell(t, f, "j", "x"), "the stopped kernel starts afresh")

	// A second rollback to the same id: the resumed copy left a fresh one.
	assert.Equal(t, "", cell(t, f, "k", "x = 3\ny = 'later'"))
	require.NoError(t, h.Rollback(ctx, cp.ID))
	assert.Equal(t, "1", cell(t, f, "k", "x"))
	assert.Equal(t, "error NameError", cell(t, f, "k", "y"))
	assert.Equal(t, "1", kernelCopies(t, h))
	// Rollbacks in quick succession: each resumed kernel hands over again
	// before the last one was reaped (the supervisor follows the chain).
	for i := range 30 {
		assert.Equal(t, "", cell(t, f, "k", "x = 5"))
		res, err := h.Restore(ctx, cp.ID)
		require.NoError(t, err, "rollback %d", i)
		require.Equal(t, []string{"python kernel k"}, res.Restored, "rollback %d", i)
	}
	assert.Equal(t, "1", cell(t, f, "k", "x"))
	assert.Equal(t, "1", kernelCopies(t, h))

	// A dropped checkpoint frees its copy: cp2 is dropped by the rollback
	// to cp, then Sync drops cp.
	assert.Equal(t, "", cell(t, f, "k", "x = 4"))
	cp2, err := h.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, "2", kernelCopies(t, h))
	require.NoError(t, h.Rollback(ctx, cp.ID))
	assert.Equal(t, "1", kernelCopies(t, h), "cp2's copy is gone with cp2")
	require.ErrorIs(t, h.Rollback(ctx, cp2.ID), sandbox.ErrUnknownCheckpoint)
	assert.Equal(t, "1", cell(t, f, "k", "x"), "a refused rollback changes nothing")
	require.NoError(t, h.Sync(ctx))
	assert.Equal(t, "0", kernelCopies(t, h), "Sync drops every checkpoint and frees every copy")
	assert.Equal(t, "1", cell(t, f, "k", "x"))

	// Close ends the kernel and its copies with the server: no process
	// of the kernel is left.
	_, err = h.Checkpoint(ctx)
	require.NoError(t, err)
	require.NoError(t, f.srv.Close(ctx))
	assert.Equal(t, "0", kernelCopies(t, h))
}

// TestKernelCheckpointGvisor (issue 33): under gVisor a live kernel's
// stdio are pipes from the host, which runsc checkpoint cannot save; the
// checkpoint is then of the files (the driver's, without an image) and
// the kernel's variables (the fork template, as under bwrap), and a
// rollback restores both without restarting the sandbox.
func TestKernelCheckpointGvisor(t *testing.T) {
	f, h := newGvisorCheckpointFixture(t)
	ctx := context.Background()
	assert.Equal(t, "", cell(t, f, "k", "x = 1\n_ = open('f.txt', 'w').write('one')"))
	cp, err := h.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"python kernel k"}, cp.Processes)
	assert.Equal(t, "files+processes", cp.Covers)
	assert.Equal(t, "1", kernelCopies(t, h))

	assert.Equal(t, "", cell(t, f, "k", "x = 2\n_ = open('f.txt', 'w').write('two')"))
	assert.Equal(t, "2", cell(t, f, "k", "x"))
	res, err := h.Restore(ctx, cp.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"python kernel k"}, res.Restored)
	assert.Equal(t, "1", cell(t, f, "k", "x"), "the kernel's variables are the checkpoint's")
	assert.Equal(t, "'one'", cell(t, f, "k", "open('f.txt').read()"), "and the files, in the same rollback")

	assert.Equal(t, "", cell(t, f, "k", "x = 3"))
	require.NoError(t, h.Rollback(ctx, cp.ID), "a second rollback to the same id")
	assert.Equal(t, "1", cell(t, f, "k", "x"))
	assert.Equal(t, "1", kernelCopies(t, h))
}

// An agent turn that changed no file reuses the last checkpoint's id
// (CheckpointTurn): the kernel's copy of it is replaced by one of the
// later state, not added beside it.
func TestKernelCheckpointTurnUnchanged(t *testing.T) {
	f, h := newCheckpointFixture(t)
	ctx := context.Background()
	assert.Equal(t, "", cell(t, f, "k", "x = 1"))
	cp, err := h.CheckpointTurn(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, "", cell(t, f, "k", "x = 2"))
	cp1, err := h.CheckpointTurn(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, cp.ID, cp1.ID, "no file changed: the same checkpoint")
	assert.Equal(t, []string{"python kernel k"}, cp1.Processes)
	assert.Equal(t, "1", kernelCopies(t, h), "the earlier copy of the id is freed")
	assert.Equal(t, "", cell(t, f, "k", "x = 3"))
	_, err = h.RollbackTurn(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "2", cell(t, f, "k", "x"), "the state after turn 1")
}

// A kernel executing code is a running command: a checkpoint then is
// refused, nothing taken.
func TestKernelCheckpointRefusedWhileExecuting(t *testing.T) {
	f, h := newCheckpointFixture(t)
	ctx := context.Background()
	assert.Equal(t, "", cell(t, f, "k", "import time"))
	done := make(chan string)
	go func() { done <- cell(t, f, "k", "time.sleep(1.5); 'slept'") }()
	time.Sleep(500 * time.Millisecond)
	_, err := h.Checkpoint(ctx)
	require.ErrorIs(t, err, sandbox.ErrCommandRunning)
	assert.Equal(t, "'slept'", <-done)
	list, err := h.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.Equal(t, "0", kernelCopies(t, h))
}

// TestKernelCheckpointUnprivileged re-runs the kernel checkpoint tests as
// an ordinary user.
func TestKernelCheckpointUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests cover it")
	}
	testenv.Command(t, "bwrap", "install bubblewrap (apt-get install bubblewrap)")
	_, err := testenv.RunUnprivileged(t, []string{"-test.run", "^TestKernelCheckpoint(Rollback|RefusedWhileExecuting|TurnUnchanged)$", "-test.count=1"})
	require.NoError(t, err)
}
