package dockerbackend_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// acquire acquires thread's sandbox from p, failing t on an error.
func acquire(t *testing.T, p *orchestrator.Provider, thread string) string {
	t.Helper()
	sid, err := p.Acquire(ctxT(t), thread)
	require.NoError(t, err)
	return sid
}

func exec1(t *testing.T, p *orchestrator.Provider, sid, cmd string) string {
	t.Helper()
	h, ok := p.Get(sid)
	require.True(t, ok)
	res, err := h.ExecuteCommand(ctxT(t), cmd, sandbox.ExecOptions{})
	require.NoError(t, err)
	require.True(t, res.Success, "%s: %+v", cmd, res)
	return res.Stdout
}

func TestAcquireCreatesOneSandboxPerThread(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t)
	sid := acquire(t, p, "thread-a")
	assert.Equal(t, orchestrator.SandboxIDFor("thread-a"), sid)
	assert.Len(t, sid, 16)
	out := exec1(t, p, sid, "pwd; echo hi > /mnt/user-data/outputs/x; ls /mnt/user-data")
	assert.Equal(t, "/mnt/user-data/workspace\noutputs\nuploads\nworkspace\n", out)
	b, err := os.ReadFile(filepath.Join(f.home, "threads", "thread-a", "user-data", "outputs", "x"))
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(b))

	again := acquire(t, p, "thread-a")
	assert.Equal(t, sid, again)
	cs := f.containers(t)
	require.Len(t, cs, 1)
	assert.Equal(t, "/"+f.prefix+"-"+sid, cs[0].Names[0])
	assert.Equal(t, "thread-a", cs[0].Labels["sage.sandbox.thread"])
	assert.Equal(t, p.Owner(), cs[0].Labels["sage.sandbox.owner"])
	for _, port := range cs[0].Ports {
		assert.Equal(t, "127.0.0.1", port.IP)
	}

	_, err = p.Acquire(ctxT(t), "../etc")
	var ite *orchestrator.InvalidThreadError
	assert.ErrorAs(t, err, &ite)
	assert.NoDirExists(t, filepath.Join(f.home, "etc"))

	require.NoError(t, p.Release(ctxT(t), sid))
	assert.Empty(t, f.containers(t))
	_, ok := p.Get(sid)
	assert.False(t, ok)
	assert.NoFileExists(t, filepath.Join(f.home, "threads", "thread-a", "sandbox.json"))
}

// 64 goroutines in each of 8 processes acquire one thread: exactly one
// container exists afterwards.
func TestAcquireConcurrentProcessesFileStore(t *testing.T) {
	testConcurrentProcesses(t, newFixture(t))
}

func TestAcquireConcurrentProcessesRedis(t *testing.T) {
	url := redisURL(t)
	f := newFixture(t)
	f.store = url
	testConcurrentProcesses(t, f)
}

func testConcurrentProcesses(t *testing.T, f *fixture) {
	const procs = 8
	type result struct {
		id  string
		err error
	}
	results := make(chan result, procs)
	var wg sync.WaitGroup
	for range procs {
		cmd, out := f.child(t, "acquire", "shared-thread")
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := readLine(t, out)
			results <- result{id, cmd.Wait()}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		require.NoError(t, r.err)
		assert.Equal(t, orchestrator.SandboxIDFor("shared-thread"), r.id)
	}
	require.Len(t, f.containers(t), 1, "exactly one container for the thread")
	// The sandbox outlived the children (keep) and is found again.
	p := f.provider(t)
	sid := acquire(t, p, "shared-thread")
	exec1(t, p, sid, "true")
	require.Len(t, f.containers(t), 1)
}

// kill -9 of a process that holds the thread's lock: the kernel drops
// the flock, the next acquire succeeds.
func TestKilledLockHolder(t *testing.T) {
	f := newFixture(t)
	f.killChildAt(t, "hold-lock", "t-lock", "locked")
	p := f.provider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := p.Acquire(ctx, "t-lock")
	require.NoError(t, err)
	assert.Len(t, f.containers(t), 1)
}

// kill -9 right after the container was created, before readiness and
// state: the next acquire adopts (or replaces) it; one container left.
func TestKilledMidCreate(t *testing.T) {
	f := newFixture(t)
	f.killChildAt(t, "mid-create", "t-mid", "created <nil>")
	require.Len(t, f.containers(t), 1, "the orphan exists before reconciliation")
	p := f.provider(t)
	sid := acquire(t, p, "t-mid")
	exec1(t, p, sid, "true")
	assert.Len(t, f.containers(t), 1)
	running, err := p.Backend().ListRunning(ctxT(t))
	require.NoError(t, err)
	require.Len(t, running, 1)
	info, ok, err := p.Store().Load(ctxT(t), "t-mid")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, running[0].ContainerID, info.ContainerID)
}

// A container removed behind our back is detected by the next process
// (Discover) and a new one is created; the stale record is replaced.
func TestContainerRemovedBehindOurBack(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.ShutdownPolicy = orchestrator.PolicyKeep })
	sid := acquire(t, p, "t-gone")
	old, _ := p.Info(sid)
	require.NoError(t, p.Shutdown(ctxT(t)))
	require.NoError(t, f.cli.ContainerRemove(ctxT(t), old.ContainerID, container.RemoveOptions{Force: true}))

	p2 := f.provider(t)
	sid2 := acquire(t, p2, "t-gone")
	assert.Equal(t, sid, sid2)
	info, _ := p2.Info(sid2)
	assert.NotEqual(t, old.ContainerID, info.ContainerID)
	exec1(t, p2, sid2, "true")
	assert.Len(t, f.containers(t), 1)
}

// After a restart the sandbox is recovered from state (adopted), not
// recreated.
func TestRecoverAfterRestart(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.ShutdownPolicy = orchestrator.PolicyKeep })
	sid := acquire(t, p, "t-keep")
	exec1(t, p, sid, "echo kept > /tmp/marker")
	old, _ := p.Info(sid)
	require.NoError(t, p.Shutdown(ctxT(t)))
	require.NoError(t, p.Shutdown(ctxT(t)), "idempotent")
	_, err := p.Acquire(ctxT(t), "t-keep")
	assert.ErrorIs(t, err, sandbox.ErrClosed)
	require.Len(t, f.containers(t), 1, "keep leaves the sandbox running")

	p2 := f.provider(t)
	sid2 := acquire(t, p2, "t-keep")
	info, _ := p2.Info(sid2)
	assert.Equal(t, old.ContainerID, info.ContainerID)
	assert.Equal(t, "kept\n", exec1(t, p2, sid2, "cat /tmp/marker"))
	require.NoError(t, p2.Shutdown(ctxT(t)))
	assert.Empty(t, f.containers(t), "release policy destroys what it adopted")
}

func TestCorruptStateFile(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(f.home, "threads", "t-corrupt")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sandbox.json"), []byte("{not json"), 0o600))
	p := f.provider(t)
	sid, err := p.Acquire(ctxT(t), "t-corrupt")
	require.NoError(t, err, "a corrupt state file is a miss")
	exec1(t, p, sid, "true")
	info, ok, err := p.Store().Load(ctxT(t), "t-corrupt")
	require.NoError(t, err)
	require.True(t, ok, "rewritten")
	assert.Equal(t, sid, info.SandboxID)
}

func TestUnwritableStateDir(t *testing.T) {
	f := newFixture(t)
	blocker := filepath.Join(f.home, "threads")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600)) // a file where a directory must be
	p := f.provider(t)
	_, err := p.Acquire(ctxT(t), "t-unwritable")
	require.Error(t, err)
	assert.ErrorContains(t, err, "state lock")
	assert.Empty(t, f.containers(t))
}

func TestDockerCreateFailure(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.Image = "sage-sandbox-no-such-image:none" })
	_, err := p.Acquire(ctxT(t), "t-noimage")
	require.Error(t, err)
	assert.ErrorContains(t, err, "create")
	assert.Empty(t, f.containers(t))
	_, ok, _ := p.Store().Load(ctxT(t), "t-noimage")
	assert.False(t, ok)
}

func TestReadinessNeverReached(t *testing.T) {
	f := newFixture(t)
	// Nothing listens on 9999 inside the container.
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.Port = 9999; o.ReadyTimeout = 1500 * time.Millisecond })
	start := time.Now()
	_, err := p.Acquire(ctxT(t), "t-notready")
	require.ErrorIs(t, err, aioapi.ErrNotReady)
	assert.Less(t, time.Since(start), 15*time.Second)
	assert.Empty(t, f.containers(t), "the container is destroyed")
	_, ok, _ := p.Store().Load(ctxT(t), "t-notready")
	assert.False(t, ok)
}

func TestIdleReaper(t *testing.T) {
	f := newFixture(t)
	reaping := f.provider(t, func(o *orchestrator.ProviderOptions) {
		o.IdleTimeout, o.ReapInterval = 300*time.Millisecond, 100*time.Millisecond
	})
	never := f.provider(t, func(o *orchestrator.ProviderOptions) { o.IdleTimeout, o.ReapInterval = 0, 100*time.Millisecond })
	kept := acquire(t, never, "t-never")
	sid := acquire(t, reaping, "t-idle")
	require.Eventually(t, func() bool { _, ok := reaping.Info(sid); return !ok }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return len(f.containers(t)) == 1 }, 10*time.Second, 100*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	_, ok := never.Info(kept)
	assert.True(t, ok, "idle_timeout 0 never reaps")
	assert.Len(t, f.containers(t), 1)
}

// With an unreachable Redis, Acquire fails with a clear error and creates
// nothing (never a second sandbox).
func TestRedisStoppedMidTest(t *testing.T) {
	srv := startRedis(t)
	f := newFixture(t)
	f.store = srv.url
	p := f.provider(t, func(o *orchestrator.ProviderOptions) { o.ShutdownPolicy = orchestrator.PolicyKeep })
	acquire(t, p, "t-redis")
	require.NoError(t, p.Shutdown(ctxT(t)))
	srv.stop(t)

	p2 := f.provider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := p2.Acquire(ctx, "t-redis")
	require.Error(t, err)
	assert.ErrorContains(t, err, "acquire t-redis")
	assert.ErrorContains(t, err, "redisstore:", "the owner lease (or the lock) could not be had")
	_, err = p2.Acquire(ctx, "t-redis-other")
	require.Error(t, err)
	assert.Len(t, f.containers(t), 1, "no second sandbox")
}

func TestContractThroughProvider(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t)
	sandboxtest.Run(t, sandboxtest.Options{
		New: contractNew(p, "contract-"),
		// The containers share this host's kernel and pid namespace
		// tree: their processes show in /proc here, so the suite proves
		// that no process of a killed command survives.
		HostProcesses: true,
		NoTaskPIDs:    true,
	})
}

// remoteDriver is a driver with every capability of the aio driver.
type remoteDriver interface {
	driver.Driver
	driver.BackgroundRunner
	driver.PythonRunner
	driver.TreeWalker
	driver.HostCopier
}

// released is what an application does with a sandbox from Get: Release
// the sandbox when done with it.
// contractNew is the suite's New for p: each sandbox is a new thread
// (prefix and a count), released to p when the suite closes it.
func contractNew(p *orchestrator.Provider, prefix string) func(t *testing.T) *sandbox.Sandbox {
	n := 0
	return func(t *testing.T) *sandbox.Sandbox {
		n++
		sid := acquire(t, p, prefix+strconv.Itoa(n))
		h, ok := p.Get(sid)
		require.True(t, ok)
		return sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, released{h.Driver().(remoteDriver), p, sid})
	}
}

type released struct {
	remoteDriver
	p   *orchestrator.Provider
	sid string
}

func (r released) Close(ctx context.Context) error {
	if err := r.p.Release(ctx, r.sid); !errors.Is(err, orchestrator.ErrNotCached) {
		return err
	}
	return nil
}

// The registry path: sandbox.New with mode remote, provider aio and no
// server URL acquires the thread; Close with keep leaves it running.
func TestSandboxNewOrchestrates(t *testing.T) {
	f := newFixture(t)
	cfg := sandbox.Config{Mode: sandbox.Remote, SandboxID: "t-new", Remote: sandbox.RemoteConfig{Provider: aio.ProviderName,
		ProviderConfig: map[string]any{orchestrator.KeyContainerPrefix: f.prefix, orchestrator.KeyHome: f.home, orchestrator.KeyShutdownPolicy: "keep",
			orchestrator.KeyEnvironment: map[string]any{"GREETING": "${SAGE_TEST_UNSET_VAR:-hello}"}}}}
	h, err := sandbox.New(ctxT(t), cfg)
	require.NoError(t, err)
	res, err := h.ExecuteCommand(ctxT(t), "echo $GREETING", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "hello\n", res.Stdout)
	require.NoError(t, h.Close(ctxT(t)))
	assert.Len(t, f.containers(t), 1)

	cfg.Remote.ProviderConfig[orchestrator.KeyShutdownPolicy] = "release"
	h, err = sandbox.New(ctxT(t), cfg)
	require.NoError(t, err)
	require.NoError(t, h.Close(ctxT(t)))
	assert.Empty(t, f.containers(t))

	cfg.Remote.ProviderConfig[orchestrator.KeyEnvironment] = map[string]any{"X": "$SAGE_TEST_UNSET_VAR"}
	_, err = sandbox.New(ctxT(t), cfg)
	var me *orchestrator.MissingEnvError
	require.ErrorAs(t, err, &me)
	assert.Empty(t, f.containers(t))
}

// redis on 127.0.0.1:6379 (started by .ci/setup.d/20-redis.sh).
func redisURL(t *testing.T) string {
	c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
	if err != nil {
		unavailable(t, "redis on 127.0.0.1:6379 unavailable: %v", err)
	}
	c.Close()
	return "redis://127.0.0.1:6379/0"
}

type redisServer struct {
	cmd *exec.Cmd
	url string
}

// startRedis runs a private redis-server on a free loopback port.
func startRedis(t *testing.T) *redisServer {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	s := &redisServer{cmd: cmd, url: "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"}
	t.Cleanup(func() { s.stop(t) })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	return s
}

func (s *redisServer) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Log(err)
	}
}
