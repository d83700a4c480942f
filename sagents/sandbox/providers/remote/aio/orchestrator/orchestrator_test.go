package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

func TestSandboxIDFor(t *testing.T) {
	id := orchestrator.SandboxIDFor("thread-1")
	assert.Len(t, id, 16)
	assert.Equal(t, id, orchestrator.SandboxIDFor("thread-1"))
	assert.NotEqual(t, id, orchestrator.SandboxIDFor("thread-2"))
}

func TestResolveEnv(t *testing.T) {
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"A": "1", "EMPTY": ""}[k]
		return v, ok
	}
	got, err := orchestrator.ResolveEnv(map[string]string{"x": "$A", "y": "${A}-${B:-def}", "z": "${EMPTY:-d}", "lit": "a$$b", "plain": "p"}, lookup)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"x": "1", "y": "1-def", "z": "d", "lit": "a$b", "plain": "p"}, got)
	_, err = orchestrator.ResolveEnv(map[string]string{"K": "${MISSING}"}, lookup)
	var me *orchestrator.MissingEnvError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "MISSING", me.Var)
}

func TestSandboxInfoJSON(t *testing.T) {
	var info orchestrator.SandboxInfo
	require.NoError(t, json.Unmarshal([]byte(`{"sandbox_id":"abc","base_url":"http://localhost:18080","container_name":"deer-flow-sandbox-abc","created_at":1735623456.123}`), &info))
	assert.Equal(t, "http://localhost:18080", info.URL, "legacy base_url")
	assert.Equal(t, int64(1735623456123), info.CreatedAt.UnixMilli())
	b, err := json.Marshal(info)
	require.NoError(t, err)
	assert.JSONEq(t, `{"sandbox_id":"abc","sandbox_url":"http://localhost:18080","container_name":"deer-flow-sandbox-abc","created_at":1735623456.123}`, string(b))
	require.NoError(t, json.Unmarshal([]byte(`{"sandbox_id":"x","sandbox_url":"u"}`), &info))
	assert.WithinDuration(t, time.Now(), info.CreatedAt, time.Minute, "missing created_at is now")
}

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	s := orchestrator.NewFileStore(dir)
	ctx := context.Background()
	_, ok, err := s.Load(ctx, "t1")
	require.NoError(t, err)
	assert.False(t, ok)
	info := orchestrator.SandboxInfo{SandboxID: "sid", URL: "http://127.0.0.1:1", CreatedAt: time.Now()}
	require.NoError(t, s.Save(ctx, "t1", info))
	fi, err := os.Stat(filepath.Join(dir, "threads", "t1", "sandbox.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	got, ok, err := s.Load(ctx, "t1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "sid", got.SandboxID)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "threads", "t1", "sandbox.json"), []byte("garbage"), 0o600))
	_, ok, err = s.Load(ctx, "t1")
	require.NoError(t, err)
	assert.False(t, ok, "corrupt is a miss")
	require.NoError(t, s.Remove(ctx, "t1"))
	require.NoError(t, s.Remove(ctx, "t1"))
	_, _, err = s.Load(ctx, "../x")
	assert.Error(t, err)

	unlock, err := s.Lock(ctx, "t1")
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = s.Lock(cctx, "t1")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a lock wait honours ctx")
	unlock()
	unlock2, err := s.Lock(ctx, "t1")
	require.NoError(t, err)
	unlock2()
}

func TestWaitReady(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 4 || r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	start := time.Now()
	require.NoError(t, aioapi.WaitReady(context.Background(), srv.URL, aioapi.ReadyOptions{Token: "tok"}))
	assert.Less(t, time.Since(start), 500*time.Millisecond, "10+20+40 ms of backoff, not seconds")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := aioapi.WaitReady(ctx, srv.URL, aioapi.ReadyOptions{Token: "wrong"})
	assert.ErrorIs(t, err, aioapi.ErrNotReady)
}

// newFakeBackend returns an in-memory backend whose sandboxes are all served
// by one in-process aioserver.
func newFakeBackend(t *testing.T) *orchestratortest.Backend {
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir(), RuntimeDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	srv, err := aioserver.New(aioserver.Options{Handle: h})
	require.NoError(t, err)
	require.NoError(t, srv.Ready(context.Background()))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &orchestratortest.Backend{URL: func(orchestrator.CreateRequest) string { return ts.URL }}
}

func TestProviderWithFakeBackend(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home})
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Acquire(ctx, fmt.Sprintf("t%d", i%5))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Equal(t, 5, b.Creates())
	assert.Equal(t, 0, orchestrator.ThreadLocks(p), "per-thread locks are pruned")

	anon, err := p.Acquire(ctx, "")
	require.NoError(t, err)
	assert.Contains(t, anon, "anon-")
	assert.NoDirExists(t, filepath.Join(home, "threads", anon))
	require.NoError(t, p.Release(ctx, orchestrator.SandboxIDFor("t0")))
	assert.Equal(t, 5, b.Running())
	err = p.Release(ctx, "nope")
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, p.Shutdown(ctx))
	require.NoError(t, p.Shutdown(ctx))
	assert.Equal(t, 0, b.Running(), "release policy destroys what it holds")
}

func TestProviderCreateFailureLeavesNothing(t *testing.T) {
	b := newFakeBackend(t)
	b.FailCreate(errors.New("boom"))
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: t.TempDir()})
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	_, err = p.Acquire(context.Background(), "t")
	assert.ErrorContains(t, err, "boom")
	assert.Equal(t, 0, orchestrator.ThreadLocks(p))
}

// The reaper re-checks under the lock: a sandbox used during the scan
// survives; an idle one is released.
func TestReaperRechecks(t *testing.T) {
	b := newFakeBackend(t)
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: t.TempDir(), IdleTimeout: 200 * time.Millisecond, ReapInterval: time.Hour})
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	ctx := context.Background()
	busy, err := p.Acquire(ctx, "busy")
	require.NoError(t, err)
	idle, err := p.Acquire(ctx, "idle")
	require.NoError(t, err)
	time.Sleep(250 * time.Millisecond)
	stale := orchestrator.IdleEntries(p)
	assert.Len(t, stale, 2)
	_, err = p.Acquire(ctx, "busy") // touched after the scan
	require.NoError(t, err)
	orchestrator.ReapEntries(p, stale)
	_, ok := p.Info(busy)
	assert.True(t, ok)
	_, ok = p.Info(idle)
	assert.False(t, ok)
}
