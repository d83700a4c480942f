//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestCheckpointTurns: checkpoints of agent turns (CheckpointTurn). A turn
// that changed nothing makes no new checkpoint (the last one gets its
// number), RollbackTurn finds a turn's state, an unknown turn is
// ErrUnknownTurn; and, unlike plain checkpoints, the turns outlive Close
// (the host folder still receives the live state) for the next sandbox
// of the same runtime directory to roll back to.
func TestCheckpointTurns(t *testing.T) {
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	s := newCheckpointed(t, ws, rt)
	ctx := context.Background()
	ckRun(t, s, "echo base > /workspace/base")
	c0, err := s.CheckpointTurn(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{0}, c0.Turns)
	ckRun(t, s, "echo one > /workspace/one")
	c1, err := s.CheckpointTurn(ctx, 1)
	require.NoError(t, err)
	assert.NotEqual(t, c0.ID, c1.ID)
	assert.Positive(t, c1.Size)
	ckRun(t, s, "cat /workspace/one") // a turn that only reads
	c2, err := s.CheckpointTurn(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, c1.ID, c2.ID, "an unchanged turn reuses the last checkpoint")
	assert.Equal(t, []int{1, 2}, c2.Turns)
	ckRun(t, s, "rm -rf /workspace/* && echo three > /workspace/three")
	_, err = s.CheckpointTurn(ctx, 3)
	require.NoError(t, err)
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3, "turn 2 added no checkpoint")

	_, err = s.RollbackTurn(ctx, 9)
	require.ErrorIs(t, err, sandbox.ErrUnknownTurn)
	assert.ErrorIs(t, err, sandbox.ErrUnknownCheckpoint)
	assert.Contains(t, err.Error(), "pick a turn from 0 to 3")
	require.NoError(t, s.Close(ctx))
	b, err := os.ReadFile(filepath.Join(ws, "three"))
	require.NoError(t, err, "Close wrote the live state back")
	assert.Equal(t, "three\n", string(b))

	// The next sandbox of the session finds the turns, and turn 2's state.
	s2 := newCheckpointed(t, ws, rt)
	list, err = s2.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3, "the turns outlived Close")
	assert.Equal(t, "three\n", ckRun(t, s2, "cat /workspace/three"), "it starts in the state Close wrote")
	cp, err := s2.RollbackTurn(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, c1.ID, cp.ID)
	assert.Equal(t, "base\none\n", ckRun(t, s2, "cat /workspace/base /workspace/one; ls /workspace/three 2>/dev/null || true"))
	cp, err = s2.RollbackTurn(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, c0.ID, cp.ID)
	assert.Equal(t, "base\n", ckRun(t, s2, "ls /workspace"))
	require.NoError(t, s2.Close(ctx))
	ents, err := os.ReadDir(ws)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	assert.Equal(t, "base", ents[0].Name(), "the folder holds turn 0's state")
}

// TestCheckpointTurnsDroppedByHostEdit: a host folder edited after a
// Close that kept the turns wins: the next start drops them (and their
// layers) rather than shadow the edit or write over it at its Close.
func TestCheckpointTurnsDroppedByHostEdit(t *testing.T) {
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	s := newCheckpointed(t, ws, rt)
	ctx := context.Background()
	_, err := s.CheckpointTurn(ctx, 0)
	require.NoError(t, err)
	ckRun(t, s, "echo agent > /workspace/a")
	_, err = s.CheckpointTurn(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "edited"), []byte("by hand\n"), 0o644))

	s2 := newCheckpointed(t, ws, rt)
	assert.Equal(t, "by hand\n", ckRun(t, s2, "cat /workspace/edited"), "the edit is seen")
	list, err := s2.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "the turns stood on the folder before the edit")
	_, err = s2.RollbackTurn(ctx, 1)
	assert.True(t, errors.Is(err, sandbox.ErrUnknownTurn), "%v", err)
	assert.Contains(t, err.Error(), "sage agent --checkpoints")
	require.NoError(t, s2.Close(ctx))
	b, err := os.ReadFile(filepath.Join(ws, "edited"))
	require.NoError(t, err, "Close kept the edit")
	assert.Equal(t, "by hand\n", string(b))
	ents, err := os.ReadDir(filepath.Join(rt, "layers"))
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, e.IsDir(), "layer %s left behind", e.Name())
	}
}
