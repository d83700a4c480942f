package dockerbackend_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Issue 35, items 3 and 6: kill -9 of a process holding a pool slot, an
// anonymous sandbox and a thread's sandbox. The old code left the first
// two running for ever, and the thread's, adopted by the next process
// (whose owner id differs), was never its to release: it ran until `sage
// sandbox rm`. Now the next process's Acquire takes the dead owner's
// sandbox over (same container, now its own), one sweep collects the
// rest, and that process's Shutdown leaves nothing.
func TestKilledOwnersSandboxesAreCollected(t *testing.T) {
	f := newFixture(t)
	f.killChildAt(t, "hold", "t-held", "held")
	require.Len(t, f.containers(t), 3, "the thread's, the anonymous one, a pool slot")

	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.SweepInterval = -1 })
	sid := acquire(t, p, "t-held")
	info, ok := p.Info(sid)
	require.True(t, ok)
	assert.Equal(t, p.Owner(), info.Owner, "the dead owner's sandbox was adopted but not taken over")
	assert.Len(t, f.containers(t), 3, "adopted, not created again")

	r, err := p.Sweep(ctxT(t))
	require.NoError(t, err)
	assert.Len(t, r.DeadOwners, 1)
	assert.Len(t, r.Sandboxes, 2, "the anonymous sandbox and the pool slot")
	cs := f.containers(t)
	require.Len(t, cs, 1)
	assert.Equal(t, info.ContainerID, cs[0].ID, "the taken-over sandbox survives the sweep")
	slots, _ := os.ReadDir(filepath.Join(f.home, "pool"))
	assert.Empty(t, slots, "the pool slot's directory is left")
	leases, _ := filepath.Glob(filepath.Join(f.home, "leases", "*.lock"))
	assert.Len(t, leases, 1, "only the live owner's lease file is left (the dead one's is its tombstone)")
	tombs, _ := filepath.Glob(filepath.Join(f.home, "leases", "*.gone"))
	assert.Len(t, tombs, 1, "the dead owner's tombstone")

	require.NoError(t, p.Shutdown(ctxT(t)))
	assert.Empty(t, f.containers(t), "the taken-over sandbox outlived its new owner's shutdown")
}

// Issue 35, item 4: the Docker backend checks the caller's fencing token
// against the container's label. A former holder (token 5) can neither
// destroy nor adopt (on a name conflict) the sandbox a newer holder
// (token 10) created; the newer holder can (the control).
func TestStaleFenceIsRefusedByTheBackend(t *testing.T) {
	f := newFixture(t)
	b := f.backend(t)
	req := orchestrator.CreateRequest{SandboxID: "fenced-1", ThreadID: "t-fenced", Image: orchestrator.DefaultImage,
		Port: orchestrator.DefaultPort, Token: "tok", Env: map[string]string{orchestrator.TokenEnv: "tok"}}
	newer, older := orchestrator.WithFence(ctxT(t), 10), orchestrator.WithFence(ctxT(t), 5)
	info, err := b.Create(newer, req)
	require.NoError(t, err)
	assert.EqualValues(t, 10, info.Fence)

	_, err = b.Create(older, req) // the name is taken: adopt, refused
	require.ErrorIs(t, err, orchestrator.ErrStaleFence)
	require.ErrorIs(t, b.Destroy(older, info), orchestrator.ErrStaleFence)
	_, err = b.Adopt(older, info)
	require.ErrorIs(t, err, orchestrator.ErrStaleFence)
	require.Len(t, f.containers(t), 1, "a stale holder removed the newer holder's container")

	_, err = b.Adopt(orchestrator.WithFence(ctxT(t), 11), info)
	require.NoError(t, err, "control: a newer holder adopts")
	require.NoError(t, b.Destroy(orchestrator.WithFence(ctxT(t), 11), info), "control: a newer holder destroys")
	assert.Empty(t, f.containers(t))
}

// Issue 35 (found by the fault test): a process killed between its
// container's create and start leaves a container that never ran; the
// sweep collects a dead owner's, and leaves a live owner's (it may be
// starting it now).
func TestSweepCollectsNeverStartedContainers(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.SweepInterval = -1 })
	_, err := p.Acquire(ctxT(t), "t-live") // p's lease
	require.NoError(t, err)
	b := f.backend(t)
	mk := func(id, owner string) string {
		resp, err := f.cli.ContainerCreate(ctxT(t), &container.Config{Image: orchestrator.DefaultImage, Labels: map[string]string{
			dockerbackend.LabelManaged: "1", dockerbackend.LabelID: id, dockerbackend.LabelOwner: owner,
			dockerbackend.LabelPrefix: f.prefix, dockerbackend.LabelInstallation: b.Installation()}}, nil, nil, nil, b.Name(id))
		require.NoError(t, err)
		return resp.ID
	}
	// What a process killed with -9 leaves of its lease: the unlocked
	// file (an owner the store never knew is another home's, not dead).
	require.NoError(t, os.WriteFile(filepath.Join(f.home, "leases", "long-gone-owner.lock"), nil, 0o600))
	deadID := mk("anon-never-started", "long-gone-owner")
	liveID := mk("anon-starting", p.Owner())
	r, err := p.Sweep(ctxT(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"long-gone-owner"}, r.DeadOwners)
	ids := map[string]bool{}
	for _, c := range f.containers(t) {
		ids[c.ID] = true
	}
	assert.False(t, ids[deadID], "a dead owner's never-started container was left")
	assert.True(t, ids[liveID], "a live owner's container was removed while it may be starting it")
}
