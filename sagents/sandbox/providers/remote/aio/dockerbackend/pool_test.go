package dockerbackend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

func pooled(n int) func(*orchestrator.ProviderOptions) {
	return func(o *orchestrator.ProviderOptions) { o.PoolSize = n }
}

// seed writes a file into a thread's workspace on the host.
func seed(t *testing.T, home, thread, name, content string) {
	t.Helper()
	dir := filepath.Join(home, "threads", thread, "user-data", "workspace")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

// poolContainers lists the prefix's containers that carry the pool label
// and still have their pool name (unclaimed).
func (f *fixture) poolContainers(t *testing.T) []container.Summary {
	var out []container.Summary
	for _, c := range f.containers(t) {
		if slot := c.Labels[dockerbackend.LabelPool]; slot != "" && c.Names[0] == "/"+f.prefix+"-"+slot {
			out = append(out, c)
		}
	}
	return out
}

// A new thread claims a warm sandbox: its files are there without a
// restart, no other thread's files are, and Release moves them back.
func TestPoolClaimAttachesThreadFiles(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, pooled(2))
	require.NoError(t, p.WaitPool(ctxT(t), 2))
	require.Len(t, f.poolContainers(t), 2)
	slots, err := p.Backend().(orchestrator.Pooler).ListPool(ctxT(t))
	require.NoError(t, err)
	require.Len(t, slots, 2)
	before := map[string]bool{}
	for _, s := range slots {
		before[s.ContainerID] = true
	}
	seed(t, f.home, "pool-a", "hello.txt", "from a")
	seed(t, f.home, "pool-b", "other.txt", "from b")

	sa := acquire(t, p, "pool-a")
	assert.Equal(t, orchestrator.SandboxIDFor("pool-a"), sa)
	info, ok := p.Info(sa)
	require.True(t, ok)
	assert.True(t, before[info.ContainerID], "pool-a got a pool container")
	assert.Equal(t, "from a", exec1(t, p, sa, "cat hello.txt"))
	assert.Equal(t, "hello.txt\n", exec1(t, p, sa, "ls /mnt/user-data/workspace"))
	exec1(t, p, sa, "echo made > /mnt/user-data/outputs/made.txt")
	b, err := os.ReadFile(filepath.Join(p.ThreadDir("pool-a"), "user-data", "outputs", "made.txt"))
	require.NoError(t, err, "the host sees the thread's files where they were")
	assert.Equal(t, "made\n", string(b))

	sb := acquire(t, p, "pool-b")
	infoB, _ := p.Info(sb)
	assert.NotEqual(t, info.ContainerID, infoB.ContainerID)
	assert.Equal(t, "other.txt\n", exec1(t, p, sb, "ls /mnt/user-data/workspace; ls /mnt/user-data/outputs"))

	// Another process finds the claimed sandbox by the thread's id.
	found, ok, err := p.Backend().Discover(ctxT(t), sa)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, info.ContainerID, found.ContainerID)
	assert.Equal(t, sa, found.SandboxID)

	require.NoError(t, p.WaitPool(ctxT(t), 2), "refilled in the background")
	require.NoError(t, p.Release(ctxT(t), sa))
	fi, err := os.Lstat(filepath.Join(p.ThreadDir("pool-a"), "user-data"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "moved back: a directory again, not a link")
	for _, name := range []string{"workspace/hello.txt", "outputs/made.txt"} {
		assert.FileExists(t, filepath.Join(p.ThreadDir("pool-a"), "user-data", name))
	}
	assert.NoDirExists(t, filepath.Join(f.home, "pool", info.PoolSlot), "the slot directory is removed")

	// Another process (which knows the sandbox only from the backend and
	// the store) releases pool-b: its files move back too.
	q := f.provider(t, func(o *orchestrator.ProviderOptions) { o.ShutdownPolicy = orchestrator.PolicyKeep })
	require.NoError(t, q.ReleaseThread(ctxT(t), "pool-b"))
	assert.FileExists(t, filepath.Join(p.ThreadDir("pool-b"), "user-data", "workspace", "other.txt"))

	require.NoError(t, p.Shutdown(ctxT(t)))
	assert.Empty(t, f.containers(t), "Shutdown reaps the pool (and releases the threads)")
	left, _ := os.ReadDir(filepath.Join(f.home, "pool"))
	assert.Empty(t, left, "no slot directory left")
	assert.FileExists(t, filepath.Join(p.ThreadDir("pool-b"), "user-data", "workspace", "other.txt"))
}

// A pool container removed behind the provider's back: the claim fails,
// the thread gets a fresh sandbox with its files, nothing leaks.
func TestPoolDeadSlotFallsBack(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, pooled(1))
	require.NoError(t, p.WaitPool(ctxT(t), 1))
	for _, c := range f.poolContainers(t) {
		require.NoError(t, f.cli.ContainerRemove(ctxT(t), c.ID, container.RemoveOptions{Force: true}))
	}
	seed(t, f.home, "dead-slot", "keep.txt", "kept")
	sid := acquire(t, p, "dead-slot")
	assert.Equal(t, "kept", exec1(t, p, sid, "cat keep.txt"))
	require.NoError(t, p.Shutdown(ctxT(t)))
	assert.Empty(t, f.containers(t))
	assert.FileExists(t, filepath.Join(p.ThreadDir("dead-slot"), "user-data", "workspace", "keep.txt"))
	left, _ := os.ReadDir(filepath.Join(f.home, "pool"))
	assert.Empty(t, left)
}

// Shutdown while the pool is still filling leaves no container and no
// slot directory.
func TestPoolShutdownWhileFilling(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, pooled(3))
	require.NoError(t, p.Shutdown(ctxT(t)))
	assert.Empty(t, f.containers(t))
	left, _ := os.ReadDir(filepath.Join(f.home, "pool"))
	assert.Empty(t, left)
	assert.Error(t, p.WaitPool(ctxT(t), 1))
}

// 64 goroutines in each of 8 processes, each process with its own warm
// pool, acquire 6 shared threads: every thread has one container in all
// processes, no container serves two threads, every command sees its own
// thread's files only, and no pool container outlives its process.
func TestPoolConcurrentProcesses(t *testing.T) {
	const procs, threads = 8, 6
	f := newFixture(t)
	for i := range threads {
		seed(t, f.home, fmt.Sprintf("pt-%d", i), "owner", fmt.Sprintf("pt-%d", i))
	}
	var mu sync.Mutex
	byThread := map[string]map[string]bool{} // thread -> container ids
	byContainer := map[string]map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for range procs {
		cmd, out := f.child(t, "pool", "")
		wg.Go(func() {
			for {
				line := readLine(t, out)
				if line == "" {
					break
				}
				thread, cid, _ := strings.Cut(line, " ")
				mu.Lock()
				if byThread[thread] == nil {
					byThread[thread] = map[string]bool{}
				}
				if byContainer[cid] == nil {
					byContainer[cid] = map[string]bool{}
				}
				byThread[thread][cid], byContainer[cid][thread] = true, true
				mu.Unlock()
			}
			errs <- cmd.Wait()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, byThread, threads)
	for thread, cids := range byThread {
		assert.Len(t, cids, 1, "thread %s: one container in every process", thread)
	}
	for cid, ts := range byContainer {
		assert.Len(t, ts, 1, "container %s served threads %v", cid, ts)
	}
	assert.Empty(t, f.poolContainers(t), "every process reaped its pool at Shutdown")
	assert.Len(t, f.containers(t), threads, "the threads' sandboxes (kept) and nothing else")
}

// childPool is the body of one TestPoolConcurrentProcesses process.
func childPool(b orchestrator.Backend, store orchestrator.StateStore) int {
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Store: store, Home: os.Getenv(homeEnv),
		ShutdownPolicy: orchestrator.PolicyKeep, ReadyTimeout: 2 * time.Minute, PoolSize: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer p.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := p.WaitPool(ctx, 2); err != nil {
		fmt.Fprintln(os.Stderr, "child pool:", err)
		return 1
	}
	var mu sync.Mutex
	seen := map[string]string{}
	fail := 0
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			thread := fmt.Sprintf("pt-%d", i%6)
			sid, err := p.Acquire(ctx, thread)
			var out string
			if err == nil {
				out, err = catOwner(ctx, p, sid)
			}
			info, _ := p.Info(sid)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || out != thread {
				fmt.Fprintf(os.Stderr, "child pool: %s: sandbox %s says owner %q, err %v\n", thread, sid, out, err)
				fail++
				return
			}
			seen[thread] = info.ContainerID
		})
	}
	wg.Wait()
	for thread, cid := range seen {
		fmt.Println(thread, cid)
	}
	fmt.Println()
	if fail > 0 {
		return 1
	}
	return 0
}

func catOwner(ctx context.Context, p *orchestrator.Provider, sid string) (string, error) {
	h, ok := p.Get(sid)
	if !ok {
		return "", fmt.Errorf("sandbox %s not held", sid)
	}
	res, err := h.ExecuteCommand(ctx, "cat /mnt/user-data/workspace/owner", sandbox.ExecOptions{})
	if err != nil {
		return "", err
	}
	return res.Stdout, nil
}

// `sage sandbox ls --pool` counts the unassigned pool sandboxes (and
// plain ls does not list them as threads).
func TestSandboxLsPool(t *testing.T) {
	f := newFixture(t)
	p := f.provider(t, pooled(2))
	require.NoError(t, p.WaitPool(ctxT(t), 2))
	bin, err := testenv.SageBinary()
	require.NoError(t, err)
	run := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"sandbox", "ls"}, args...)...)
		cmd.Env = append(os.Environ(), "SAGE_HOME="+f.home, "SAGE_AIO_CONTAINER_PREFIX="+f.prefix,
			"SAGE_AIO_INSTALLATION_ID="+f.backend(t).Installation(), "SAGE_AIO_POOL_SIZE=3")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	out := run("--pool")
	assert.Contains(t, out, "2 unassigned pool sandboxes")
	var rows []struct {
		SandboxID string `json:"sandbox_id"`
		Pool      bool   `json:"pool"`
	}
	require.NoError(t, json.Unmarshal([]byte(run("--pool", "--json")), &rows))
	require.Len(t, rows, 2)
	for _, r := range rows {
		assert.True(t, r.Pool)
		assert.True(t, strings.HasPrefix(r.SandboxID, "pool-"), r.SandboxID)
	}
	assert.NotContains(t, run(), "pool-", "plain ls lists threads, not the pool")
	assert.Len(t, f.poolContainers(t), 2, "the CLI started no pool of its own (SAGE_AIO_POOL_SIZE is ignored by it)")
}
