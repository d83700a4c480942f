package dockerbackend_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// Issue 15, fault 1: a provider with another prefix, or the same prefix
// and another installation, must neither adopt nor list nor remove the
// first deployment's sandbox for the same thread.
func TestNoCrossDeploymentAdoption(t *testing.T) {
	a := newFixture(t)
	pa := a.provider(t)
	sid := acquire(t, pa, "t-shared")
	infoA, ok := pa.Info(sid)
	require.True(t, ok)

	b := newFixture(t) // another prefix, another home
	pb := b.provider(t)
	sidB := acquire(t, pb, "t-shared")
	assert.Equal(t, sid, sidB, "same deterministic id")
	infoB, _ := pb.Info(sidB)
	assert.NotEqual(t, infoA.ContainerID, infoB.ContainerID, "B adopted A's container")
	assert.NotEqual(t, infoA.Token, infoB.Token, "B got A's token")
	assert.Len(t, b.containers(t), 1, "B created its own")

	// Same prefix, another installation: the container name is taken by
	// A, so B must refuse rather than adopt, and see nothing of A's.
	other, err := dockerbackend.New(dockerbackend.Options{Client: a.cli, Prefix: a.prefix, Installation: "other-install"})
	require.NoError(t, err)
	_, found, err := other.Discover(ctxT(t), sid)
	require.NoError(t, err)
	assert.False(t, found, "Discover crossed installations")
	list, err := other.ListRunning(ctxT(t))
	require.NoError(t, err)
	assert.Empty(t, list, "ListRunning crossed installations")
	n, err := other.RemoveAll(ctxT(t))
	require.NoError(t, err)
	assert.Zero(t, n, "RemoveAll crossed installations")
	_, err = other.Create(ctxT(t), orchestrator.CreateRequest{SandboxID: sid, Image: orchestrator.DefaultImage, Port: orchestrator.DefaultPort})
	require.ErrorIs(t, err, dockerbackend.ErrForeign)
	assert.Len(t, a.containers(t), 1, "A's sandbox survives")
	assert.Equal(t, "hi\n", exec1(t, pa, sid, "echo hi"))
}

// Issue 15, fault 2: activity counts. A command longer than the idle
// timeout is not killed, nor is a sandbox with a running background
// task; the control shows the same provider does reap an unused one.
func TestReaperCountsActivity(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) {
		o.IdleTimeout, o.ReapInterval = time.Second, 100*time.Millisecond
	})
	sid := acquire(t, p, "t-busy")
	h, ok := p.Get(sid)
	require.True(t, ok)
	res, err := h.ExecuteCommand(ctxT(t), "sleep 1.6; echo done", sandbox.ExecOptions{})
	require.NoError(t, err, "a command longer than the idle timeout was killed")
	assert.Equal(t, "done\n", res.Stdout)
	time.Sleep(300 * time.Millisecond)
	_, err = h.ExecuteCommand(ctxT(t), "true", sandbox.ExecOptions{})
	require.NoError(t, err)

	task, err := h.StartBackground(ctxT(t), "sleep 2.5", sandbox.ExecOptions{})
	require.NoError(t, err)
	time.Sleep(1800 * time.Millisecond) // idle, but the task runs
	_, ok = p.Info(sid)
	assert.True(t, ok, "reaped while a background task ran")
	_ = task

	// Control: once the task has ended and nothing is used, it is reaped.
	require.Eventually(t, func() bool { _, ok := p.Info(sid); return !ok }, 10*time.Second, 100*time.Millisecond)
}

// Issue 15, fault 3: a discovered sandbox owned by another process that
// is slow to become ready is not destroyed.
func TestSlowReadyForeignSandboxSurvives(t *testing.T) {
	f := newFixture(t)
	owner := f.provider(t, func(o *orchestrator.ProviderOptions) { o.ShutdownPolicy = orchestrator.PolicyKeep })
	sid := acquire(t, owner, "t-slow")
	info, _ := owner.Info(sid)
	out, err := exec.Command("docker", "pause", info.ContainerID).CombinedOutput()
	require.NoError(t, err, string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "unpause", info.ContainerID).Run() })

	other := f.provider(t, func(o *orchestrator.ProviderOptions) { o.ReadyTimeout = time.Second })
	_, err = other.Acquire(ctxT(t), "t-slow")
	require.Error(t, err)
	require.NoError(t, exec.Command("docker", "unpause", info.ContainerID).Run())
	cs := f.containers(t)
	require.Len(t, cs, 1, "the owner's sandbox was destroyed")
	assert.Equal(t, info.ContainerID, cs[0].ID)
	assert.Equal(t, "ok\n", exec1(t, owner, sid, "echo ok"))

	// Control: an unowned (kept) one that is not ready is replaced.
	require.NoError(t, owner.Shutdown(ctxT(t)))
	require.NoError(t, exec.Command("docker", "pause", info.ContainerID).Run())
	// 5 s: enough for the replacement to start on a loaded machine.
	third := f.provider(t, func(o *orchestrator.ProviderOptions) { o.ReadyTimeout = 5 * time.Second })
	_, err = third.Acquire(ctxT(t), "t-slow")
	require.NoError(t, err, "an unowned sandbox that is not ready is replaced")
	cs = f.containers(t)
	require.Len(t, cs, 1)
	assert.NotEqual(t, info.ContainerID, cs[0].ID)
}

// Issue 15: sandbox URLs carry the advertised host, not always
// 127.0.0.1, and answer there.
func TestAdvertiseHost(t *testing.T) {
	f := newFixture(t)
	b, err := dockerbackend.New(dockerbackend.Options{Client: f.cli, Prefix: f.prefix, AdvertiseHost: "localhost"})
	require.NoError(t, err)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.Backend = b })
	sid := acquire(t, p, "t-adv")
	info, _ := p.Info(sid)
	assert.Regexp(t, `^http://localhost:\d+$`, info.URL)
	assert.Equal(t, "ok\n", exec1(t, p, sid, "echo ok"))
}

// Issue 37: a missing image is named with the fix (build it, or name one
// that exists), and nothing is left: no container.
func TestCreateWithoutTheImageNamesTheFix(t *testing.T) {
	f := newFixture(t)
	const img = "sage-sandbox-test-missing:none"
	_, err := f.backend(t).Create(ctxT(t), orchestrator.CreateRequest{SandboxID: "noimage", Image: img, Port: orchestrator.DefaultPort})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fix: build the image with 'sage image build --tag "+img+"'")
	assert.Contains(t, err.Error(), "SAGE_AIO_IMAGE")
	assert.Empty(t, f.containers(t), "no container left behind")
	info, err := f.backend(t).Create(ctxT(t), orchestrator.CreateRequest{SandboxID: "image", Image: orchestrator.DefaultImage, Port: orchestrator.DefaultPort})
	require.NoError(t, err, "control: the image that exists starts")
	assert.NotEmpty(t, info.ContainerID)
}
