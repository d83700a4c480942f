//go:build linux

package local

import (
	"context"
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
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// forkParent is a sandbox with checkpoints on over a new workspace, its
// runtime directory in rt's own temporary parent (so that what a Close
// sets aside there can be looked for), with pool as Options.ForkPool.
func forkParent(t *testing.T, pool int) (*Sandbox, driver.Config) {
	t.Helper()
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	fresh := false
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: filepath.Join(sandboxtest.TempDir(t), "rt"),
		Local: sandbox.LocalConfig{Checkpoints: true, FreshPerCommand: &fresh, Isolation: sandbox.Isolation{Linux: sandbox.IsolationBwrap}}}
	s, err := NewWithOptions(context.Background(), cfg, Options{Session: SessionOptions{Enabled: true}, ForkPool: pool})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, cfg
}

func fkRun(t *testing.T, s *Sandbox, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.Exec(ctx, driver.ExecSpec{Command: cmd})
	require.NoError(t, err, cmd)
	require.True(t, res.Success, "%s: %s%s", cmd, res.Stdout, res.Stderr)
	return res.Stdout
}

// forkCfg is cfg for a fork into a new folder.
func forkCfg(t *testing.T, cfg driver.Config) driver.Config {
	cfg.Workspace, cfg.SandboxID, cfg.RuntimeDir = filepath.Join(sandboxtest.TempDir(t), "fork"), "", ""
	return cfg
}

func held() int {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	n := 0
	for _, l := range sharedLayers.by {
		n += l.refs
	}
	return n
}

// TestForkSharesLayers: a fork stands on its parent's frozen layers (no
// copy: its folder stays empty until its Close writes its files there),
// and neither sees the other's writes while they share them.
func TestForkSharesLayers(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "pooled"}[pooled], func(t *testing.T) {
			ctx := context.Background()
			s, cfg := forkParent(t, map[bool]int{false: -1, true: 1}[pooled])
			if pooled {
				waitPool(t, s, 1)
			}
			fkRun(t, s, "echo p0 > /workspace/a; mkdir /workspace/d; echo tmp > /tmp/t")
			cp, err := s.Checkpoint(ctx)
			require.NoError(t, err)
			before := held()
			fc := forkCfg(t, cfg)
			f, err := s.fork(ctx, cp.ID, fc, pooled)
			require.NoError(t, err)
			defer f.Close(ctx)
			assert.Greater(t, held(), before, "the fork holds its parent's layers")
			assert.Equal(t, "p0\ntmp\n", fkRun(t, f, "cat /workspace/a /tmp/t"))
			assert.Empty(t, entries(t, fc.Workspace), "nothing was copied into the fork's folder")
			if pooled {
				assert.NotEmpty(t, f.forkIn.placeholder, "the fork is the pool's sandbox")
			}

			fkRun(t, s, "echo parent > /workspace/p; echo p1 > /workspace/a; rm -r /workspace/d")
			fkRun(t, f, "echo fork > /workspace/f; echo f1 > /workspace/a")
			assert.Equal(t, "no\np1\n", fkRun(t, s, "test -e /workspace/f && echo yes || echo no; cat /workspace/a"))
			assert.Equal(t, "no\nf1\nyes\n", fkRun(t, f, "test -e /workspace/p && echo yes || echo no; cat /workspace/a; test -d /workspace/d && echo yes"))
			b, err := f.ReadFile(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, "f1\n", string(b), "host file operations see the fork's live state")

			require.NoError(t, f.Close(ctx))
			assert.Equal(t, []string{"a", "d", "f"}, entries(t, fc.Workspace), "Close wrote the fork's files into its folder")
			assert.Equal(t, before, held(), "Close let the layers go")
		})
	}
}

// entries are the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestForkOutlivesParent: the parent rolled back past the fork's layers,
// merged them away and closed (its runtime directory removed) leaves the
// fork's files intact, through a restart of the fork's session sandbox
// too (a new mount of the layers by their new paths); the fork's Close
// then removes what the parent set aside.
func TestForkOutlivesParent(t *testing.T) {
	defer func(n int) { maxLayers = n }(maxLayers)
	maxLayers = 4
	ctx := context.Background()
	s, cfg := forkParent(t, -1)
	fkRun(t, s, "echo 1 > /workspace/a")
	cp1, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	fkRun(t, s, "echo 2 > /workspace/a; echo 2 > /workspace/b")
	cp2, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	fc := forkCfg(t, cfg)
	f, err := s.fork(ctx, cp2.ID, fc, false)
	require.NoError(t, err)
	defer f.Close(ctx)
	assert.Equal(t, "2\n2\n", fkRun(t, f, "cat /workspace/a /workspace/b"))

	require.NoError(t, s.Rollback(ctx, cp1.ID)) // frees cp2's layer: set aside for the fork
	for i := range 6 {                          // merges past the base and cp1's layer
		fkRun(t, s, "echo "+string(rune('a'+i))+" > /workspace/m")
		_, err := s.Checkpoint(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, "2\n2\n", fkRun(t, f, "cat /workspace/a /workspace/b"))
	rt := filepath.Dir(s.runtimeDir)
	require.NoError(t, s.Close(ctx))
	_, err = os.Stat(s.runtimeDir)
	assert.True(t, os.IsNotExist(err) || err == nil) // the test's runtime dir is not the sandbox's own
	assert.Equal(t, "2\n2\n", fkRun(t, f, "cat /workspace/a /workspace/b"), "after the parent's Close")
	f.dropSession() // the next command mounts the layers again, where they are now
	assert.Equal(t, "2\n2\n", fkRun(t, f, "cat /workspace/a /workspace/b; echo 3 > /workspace/c"), "after a restart")
	require.NoError(t, f.Close(ctx))
	assert.Equal(t, []string{"a", "b", "c"}, entries(t, fc.Workspace))
	aside, _ := filepath.Glob(filepath.Join(rt, ".sage-forklayer-*"))
	assert.Empty(t, aside, "the fork's Close removed the layers its parent set aside")
	assert.Zero(t, held())
}

// TestForkOutlivesOwnRuntime: an anonymous parent (its runtime directory
// its own, removed at Close) closed under a live fork. With a checkpoint
// of an agent's turn, Close keeps the layers (they outlive it in a named
// sandbox) instead of freeing them one by one: the removal of the
// runtime directory must still spare those the fork stands on (evacuate).
func TestForkOutlivesOwnRuntime(t *testing.T) {
	for _, turn := range []bool{false, true} {
		t.Run(map[bool]string{false: "checkpoint", true: "turn"}[turn], func(t *testing.T) { forkOutlivesOwnRuntime(t, turn) })
	}
}

func forkOutlivesOwnRuntime(t *testing.T, turn bool) {
	ctx := context.Background()
	fresh := false
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t),
		Local: sandbox.LocalConfig{Checkpoints: true, FreshPerCommand: &fresh, Isolation: sandbox.Isolation{Linux: sandbox.IsolationBwrap}}}
	s, err := NewWithOptions(ctx, cfg, Options{Session: SessionOptions{Enabled: true}, ForkPool: -1})
	require.NoError(t, err)
	defer s.Close(ctx)
	fkRun(t, s, "echo kept > /workspace/k")
	cp, err := s.Checkpoint(ctx)
	if turn {
		cp, err = s.CheckpointTurn(ctx, 1)
	}
	require.NoError(t, err)
	f, err := s.fork(ctx, cp.ID, forkCfg(t, cfg), false)
	require.NoError(t, err)
	defer f.Close(ctx)
	require.NoError(t, s.Close(ctx))
	_, err = os.Stat(s.runtimeDir)
	require.True(t, os.IsNotExist(err), "the parent's runtime directory is gone")
	f.dropSession()
	assert.Equal(t, "kept\n", fkRun(t, f, "cat /workspace/k"))
	require.NoError(t, f.Close(ctx))
	aside, _ := filepath.Glob(filepath.Join(filepath.Dir(s.runtimeDir), ".sage-forklayer-*"))
	assert.Empty(t, aside)
}

// TestForkLimit: a fork past maxForks is one error, with nothing made
// (no folder, no held layer); closing a fork makes room.
func TestForkLimit(t *testing.T) {
	defer func(n int) { maxForks = n }(maxForks)
	maxForks = 1
	ctx := context.Background()
	s, cfg := forkParent(t, -1)
	fkRun(t, s, "echo x > /workspace/x")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	f, err := s.fork(ctx, cp.ID, forkCfg(t, cfg), false)
	require.NoError(t, err)
	h := held()
	second := forkCfg(t, cfg)
	_, err = s.fork(ctx, cp.ID, second, false)
	require.ErrorContains(t, err, "the most it keeps; fix: close one of them first")
	assert.NotContains(t, strings.TrimSpace(err.Error()), "\n")
	_, serr := os.Stat(second.Workspace)
	assert.True(t, os.IsNotExist(serr), "no folder made")
	assert.Equal(t, h, held(), "no layer held")
	require.NoError(t, f.Close(ctx))
	f2, err := s.fork(ctx, cp.ID, second, false)
	require.NoError(t, err, "a closed fork made room")
	require.NoError(t, f2.Close(ctx))
}

// TestForkPoolClosed: the pool refills after a take, and its sandboxes
// are gone after the owner's Close: no process, no folder.
func TestForkPoolClosed(t *testing.T) {
	ctx := context.Background()
	s, cfg := forkParent(t, 1)
	sp := waitPool(t, s, 1)[0]
	fkRun(t, s, "echo x > /workspace/x")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	f, err := s.fork(ctx, cp.ID, forkCfg(t, cfg), true)
	require.NoError(t, err)
	require.Same(t, sp, f, "the fork took the pre-started sandbox")
	assert.Equal(t, "x\n", fkRun(t, f, "cat /workspace/x"))
	require.NoError(t, f.Close(ctx))
	next := waitPool(t, s, 1)[0]
	next.sess.mu.Lock()
	pid := next.sess.live.cmd.Process.Pid
	next.sess.mu.Unlock()
	placeholder, rt := next.forkIn.placeholder, next.runtimeDir
	require.NoError(t, s.Close(ctx))
	for _, p := range []string{placeholder, rt} {
		_, err := os.Stat(p)
		assert.True(t, os.IsNotExist(err), "%s is gone", p)
	}
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the pooled session sandbox's process is gone")
}

// waitPool waits until s's pool holds n ready sandboxes, and returns them.
func waitPool(t testing.TB, s *Sandbox, n int) []*Sandbox {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		s.forks.mu.Lock()
		p := s.forks.pool
		if p != nil && len(p.spares) >= n {
			out := append([]*Sandbox(nil), p.spares...)
			s.forks.mu.Unlock()
			return out
		}
		var ch chan struct{}
		if p != nil {
			ch = p.changed
		}
		s.forks.mu.Unlock()
		if ch == nil {
			ch = make(chan struct{})
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("the fork pool did not fill to %d in 60s", n)
		}
	}
}

// TestForkUnprivileged re-runs the fork tests as an ordinary user.
func TestForkUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged")
	}
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	_, err := testenv.RunUnprivileged(t, []string{"-test.run", "^TestFork(SharesLayers|OutlivesParent|OutlivesOwnRuntime|Limit|PoolClosed|BaseCopiedAhead|LeftoversSweptAfterKill9)$", "-test.count=1", "-test.v"})
	require.NoError(t, err)
}

// TestForkBaseCopiedAhead: a sandbox that asked for a fork pool copies
// its host folder into a base layer in the background after its first
// checkpoint; the first fork stands on that copy (no copy in the fork),
// with the checkpoint's files. A Sync, which writes the folder, drops
// such a copy first.
func TestForkBaseCopiedAhead(t *testing.T) {
	ctx := context.Background()
	s, cfg := forkParent(t, 1)
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Workspace, "host"), []byte("in the folder\n"), 0o644))
	fkRun(t, s, "echo a > /workspace/a")
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	s.ckpt.mu.Lock()
	bc := s.ckpt.base
	s.ckpt.mu.Unlock()
	require.NotNil(t, bc, "the folder is copied ahead after the first checkpoint")
	<-bc.done
	require.NoError(t, bc.err)
	assert.FileExists(t, filepath.Join(s.ckpt.layerDir(bc.n), "u", "host"))
	f, err := s.fork(ctx, cp.ID, forkCfg(t, cfg), false)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(ctx) })
	s.ckpt.mu.Lock()
	base := s.ckpt.m.Base
	s.ckpt.mu.Unlock()
	assert.Equal(t, bc.n, base, "the fork stands on the copy made ahead")
	assert.Equal(t, "in the folder\na\n", fkRun(t, f, "cat /workspace/host /workspace/a"))

	// A sandbox whose copy is still there at a Sync drops it.
	s2, cfg2 := forkParent(t, 1)
	fkRun(t, s2, "echo b > /workspace/b")
	_, err = s2.Checkpoint(ctx)
	require.NoError(t, err)
	s2.ckpt.mu.Lock()
	bc2 := s2.ckpt.base
	s2.ckpt.mu.Unlock()
	require.NotNil(t, bc2)
	require.NoError(t, s2.Sync(ctx))
	s2.ckpt.mu.Lock()
	assert.Nil(t, s2.ckpt.base, "dropped by the Sync")
	assert.Zero(t, s2.ckpt.m.Base)
	s2.ckpt.mu.Unlock()
	s2.ckpt.bg.Wait()
	assert.NoDirExists(t, s2.ckpt.layerDir(bc2.n), "and freed")
	assert.FileExists(t, filepath.Join(cfg2.Workspace, "b"), "the folder got the live state")
}
