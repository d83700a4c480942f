package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Two processes share one thread: one that adopted the sandbox must not
// destroy it when it finds it idle, nor on shutdown; its creator does.
// Each path is shown to run (issue 35, item 7: the adopter's reaper used
// to drop the entry before its Shutdown, so removing Shutdown's owner
// check left this test green): the reaping adopter no longer holds the
// entry afterwards, and the second adopter, which has no reaper, still
// holds it when it shuts down.
func TestOnlyTheOwnerDestroys(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	ctx := context.Background()
	creator, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "creator"})
	require.NoError(t, err)
	sid, err := creator.Acquire(ctx, "shared")
	require.NoError(t, err)

	reaping, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "reaping",
		IdleTimeout: 50 * time.Millisecond, ReapInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	_, err = reaping.Acquire(ctx, "shared")
	require.NoError(t, err)
	assert.Equal(t, 1, b.Creates(), "adopted, not created again")
	require.Eventually(t, func() bool { _, held := reaping.Info(sid); return !held }, 5*time.Second, 10*time.Millisecond,
		"the adopter's reaper never found the sandbox idle")
	assert.Equal(t, 1, b.Running(), "the adopter's reaper destroyed a sandbox it does not own")
	require.NoError(t, reaping.Shutdown(ctx))

	holding, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "holding"})
	require.NoError(t, err)
	_, err = holding.Acquire(ctx, "shared")
	require.NoError(t, err)
	info, held := holding.Info(sid)
	require.True(t, held, "the adopter holds the entry when it shuts down")
	assert.Equal(t, "creator", info.Owner)
	require.NoError(t, holding.Shutdown(ctx))
	assert.Equal(t, 1, b.Running(), "the adopter's shutdown destroyed a sandbox it does not own")

	require.NoError(t, creator.Shutdown(ctx))
	assert.Equal(t, 0, b.Running(), "the creator releases what it created")
}

// A cache hit notices, within LivenessInterval, that the sandbox is gone
// and creates a new one.
func TestCacheHitNoticesAGoneSandbox(t *testing.T) {
	b := newFakeBackend(t)
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: t.TempDir(), LivenessInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	ctx := context.Background()
	sid, err := p.Acquire(ctx, "t1")
	require.NoError(t, err)
	b.Vanish(sid) // removed behind our back
	time.Sleep(30 * time.Millisecond)
	again, err := p.Acquire(ctx, "t1")
	require.NoError(t, err)
	assert.Equal(t, sid, again, "same deterministic id")
	assert.Equal(t, 2, b.Creates(), "a new sandbox was created")
	assert.Equal(t, 1, b.Running())
}

// Shutdown is idempotent, and a closed provider acquires nothing.
func TestShutdownAfterShutdownIsNoError(t *testing.T) {
	b := newFakeBackend(t)
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(context.Background()))
	require.NoError(t, p.Shutdown(context.Background()))
	_, err = p.Acquire(context.Background(), "late")
	assert.Error(t, err)
	assert.Equal(t, 0, b.Running())
}
