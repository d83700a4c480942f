package orchestratortest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

func TestBackend(t *testing.T) {
	ctx := context.Background()
	var b orchestratortest.Backend
	req := orchestrator.CreateRequest{SandboxID: "s1", ThreadID: "t1", Port: 8080}
	info, err := b.Create(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "http://sandbox-s1:8080", info.URL)
	again, err := b.Create(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, info, again, "one sandbox per id")
	alive, err := b.IsAlive(ctx, info)
	require.NoError(t, err)
	assert.True(t, alive)

	boom := errors.New("boom")
	b.FailCreate(boom)
	_, err = b.Create(ctx, orchestrator.CreateRequest{SandboxID: "s2"})
	assert.ErrorIs(t, err, boom)
	assert.Len(t, b.Requests(), 3, "failed requests are recorded too")
	assert.Equal(t, 2, b.Creates())

	b.Vanish("s1")
	_, ok, err := b.Discover(ctx, "s1")
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Empty(t, b.Destroyed(), "vanished, not destroyed")
	b.FailCreate(nil)
	_, err = b.Create(ctx, req)
	require.NoError(t, err)
	require.NoError(t, b.Destroy(ctx, info))
	assert.Zero(t, b.Running())
	assert.Len(t, b.Destroyed(), 1)
	b.SetCheckErr(boom)
	assert.ErrorIs(t, b.Check(ctx), boom)
}
