package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// ckFake is a driver with checkpoints, to test what the core adds.
type ckFake struct {
	*sandboxtest.Fake
	calls []string
}

func (f *ckFake) Checkpoint(context.Context) (sandbox.Checkpoint, error) {
	f.calls = append(f.calls, "checkpoint")
	return sandbox.Checkpoint{ID: "ck-1", Covers: "files"}, nil
}

func (f *ckFake) Rollback(_ context.Context, id sandbox.CheckpointID) error {
	f.calls = append(f.calls, "rollback "+string(id))
	if id != "ck-1" {
		return sandbox.ErrUnknownCheckpoint
	}
	return nil
}

func (f *ckFake) Checkpoints(context.Context) ([]sandbox.Checkpoint, error) {
	return []sandbox.Checkpoint{{ID: "ck-1"}}, nil
}

func (f *ckFake) Export(context.Context, sandbox.CheckpointID, string) error {
	return errors.New("export failed")
}

func (f *ckFake) Sync(context.Context) error { f.calls = append(f.calls, "sync"); return nil }

// TestCheckpointsCore: a mode without the capability answers
// ErrUnsupported for each operation (the remote modes and passthrough);
// one with it is reached until Close, then ErrClosed; a fork whose copy
// failed opens nothing and needs a folder.
func TestCheckpointsCore(t *testing.T) {
	ctx := context.Background()
	plain := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Passthrough}, &sandboxtest.Fake{})
	_, err := plain.Checkpoint(ctx)
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	assert.ErrorIs(t, plain.Rollback(ctx, "x"), sandbox.ErrUnsupported)
	_, err = plain.Checkpoints(ctx)
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	_, err = plain.Fork(ctx, "x", t.TempDir())
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	assert.ErrorIs(t, plain.Sync(ctx), sandbox.ErrUnsupported)

	f := &ckFake{Fake: &sandboxtest.Fake{}}
	s := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Local}, f)
	cp, err := s.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandbox.CheckpointID("ck-1"), cp.ID)
	assert.ErrorIs(t, s.Rollback(ctx, "nope"), sandbox.ErrUnknownCheckpoint)
	require.NoError(t, s.Sync(ctx))
	_, err = s.Fork(ctx, "ck-1", "")
	assert.ErrorContains(t, err, "new workspace folder is required")
	_, err = s.Fork(ctx, "ck-1", t.TempDir())
	assert.ErrorContains(t, err, "export failed")
	require.NoError(t, s.Close(ctx))
	assert.ErrorIs(t, s.Rollback(ctx, "ck-1"), sandbox.ErrClosed)
	_, err = s.Checkpoints(ctx)
	assert.ErrorIs(t, err, sandbox.ErrClosed)
	assert.Equal(t, []string{"checkpoint", "rollback nope", "sync"}, f.calls, "nothing reached the driver after Close")
}
