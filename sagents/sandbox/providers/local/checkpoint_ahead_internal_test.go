//go:build linux

package local

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workspaceState is the workspace as a command sees it: each entry's
// path, type, mode, size and link target, and each file's digest.
const workspaceState = `cd /workspace && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort && find . -type f -exec md5sum {} + | LC_ALL=C sort`

// waitAhead waits until the agent built the overlays of the next
// checkpoint and rollback ahead (prepareAhead), and says which uppers
// they have.
func waitAhead(t *testing.T, s *Sandbox) []int {
	t.Helper()
	s.ckpt.mu.Lock()
	ah := s.ckpt.ahead
	s.ckpt.mu.Unlock()
	require.NotNil(t, ah, "no overlay is built ahead")
	select {
	case <-ah.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the overlays built ahead did not come in 30s")
	}
	require.NoError(t, ah.err)
	var ups []int
	for _, it := range ah.items {
		ups = append(ups, it.upper)
	}
	return ups
}

// TestCheckpointAheadWindow: the overlay of the next checkpoint is built
// ahead with the live upper among its lowers (prepareAhead), which the
// commands go on writing until the checkpoint freezes it, and that of the
// next rollback over the layers alone. Files written, removed, renamed,
// replaced by directories (opaque ones), chmod'ed and linked in that
// window are all in the checkpoint's state, to the byte; a rollback to it
// after more changes (through the overlay built ahead for it) and to the
// one before show their states exactly.
func TestCheckpointAheadWindow(t *testing.T) {
	ctx := context.Background()
	s, _ := forkParent(t, -1)
	fkRun(t, s, "cd /workspace && echo a > a && echo r > r && mkdir -p d/sub e && echo x > d/x && echo y > d/sub/y && ln -s a l && echo h > h")
	cp0, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	want0 := fkRun(t, s, workspaceState)
	window := []string{
		// copy-up and rewrite, removal (whiteout), a directory renamed,
		// one removed and made again (opaque), a symlink replaced, a
		// new hard link, a mode and a truncation, a file in the root.
		"cd /workspace && echo a2 >> a && rm r && mv d d2 && rm -rf e && mkdir e && echo new > e/n && ln -sf h l && ln h h2 && chmod 600 h && : > d2/x && echo n > n",
		// the next window: over a layer that was an upper in the last one
		"cd /workspace && rm -rf d2 && mv n m && mkdir r && echo rr > r/f && rm l && echo a3 > a && chmod 755 e",
		// and one with nothing but removals in the root
		"cd /workspace && rm -rf ./*",
	}
	for i, cmd := range window {
		ups := waitAhead(t, s)
		require.Len(t, ups, 2, "one for a checkpoint, one for a rollback to the latest")
		fkRun(t, s, cmd) // in the window: the overlay of the next checkpoint is built already
		want := fkRun(t, s, workspaceState)
		cp, err := s.Checkpoint(ctx)
		require.NoError(t, err)
		s.ckpt.mu.Lock()
		upper := s.ckpt.m.Upper
		s.ckpt.mu.Unlock()
		assert.Equal(t, ups[0], upper, "window %d: the checkpoint took the overlay built ahead", i)
		assert.Equal(t, want, fkRun(t, s, workspaceState), "window %d: the checkpoint's view", i)

		ups = waitAhead(t, s)
		fkRun(t, s, "cd /workspace && echo later > later && rm -rf ./a ./e")
		require.NoError(t, s.Rollback(ctx, cp.ID))
		s.ckpt.mu.Lock()
		upper = s.ckpt.m.Upper
		s.ckpt.mu.Unlock()
		assert.Equal(t, ups[1], upper, "window %d: the rollback took the overlay built ahead", i)
		assert.Equal(t, want, fkRun(t, s, workspaceState), "window %d: after the rollback", i)
		data, err := s.HostFS.ReadFile(ctx, "later")
		assert.Error(t, err, "window %d: the host sees the rolled-back state too (%q)", i, data)
	}
	require.NoError(t, s.Rollback(ctx, cp0.ID))
	assert.Equal(t, want0, fkRun(t, s, workspaceState), "the first checkpoint")
}
