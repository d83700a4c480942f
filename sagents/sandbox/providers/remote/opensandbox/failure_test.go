package opensandbox

import (
	"context"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
)

func testConfig(srv *opensandboxtest.Server) config {
	return config{URL: srv.URL, APIKey: srv.APIKey, ExecdToken: srv.ExecdToken, Image: "img:1",
		Entrypoint: []string{"tail", "-f", "/dev/null"}, Resources: map[string]string{"cpu": "1"},
		Workspace: "auto", ReadyTimeout: 5 * time.Second, ExecdTmp: srv.ExecdTmp}
}

func TestCreateFails(t *testing.T) {
	srv := opensandboxtest.New(t)
	srv.FailCreate = true
	_, err := open(context.Background(), testConfig(srv))
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 500, ae.Status)
	assert.Zero(t, srv.Live())
}

func TestWrongAPIKey(t *testing.T) {
	srv := opensandboxtest.New(t)
	c := testConfig(srv)
	c.APIKey = "wrong"
	_, err := open(context.Background(), c)
	assert.ErrorIs(t, err, fs.ErrPermission)
	assert.Zero(t, srv.Live())
}

func TestWrongExecdTokenLeavesNothing(t *testing.T) {
	srv := opensandboxtest.New(t)
	c := testConfig(srv)
	c.ExecdToken = "wrong"
	start := time.Now()
	_, err := open(context.Background(), c)
	assert.ErrorIs(t, err, fs.ErrPermission)
	assert.Less(t, time.Since(start), c.ReadyTimeout, "a refused token ends the wait at once")
	assert.Zero(t, srv.Live(), "the sandbox created for the failed open is deleted")
}

func TestExecdNeverReady(t *testing.T) {
	srv := opensandboxtest.New(t)
	srv.ExecdDown = true
	c := testConfig(srv)
	c.ReadyTimeout = time.Second
	_, err := open(context.Background(), c)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "never became ready")
	assert.Zero(t, srv.Live())
}

func TestExpiredBehindOurBack(t *testing.T) {
	srv := opensandboxtest.New(t)
	s, err := open(context.Background(), testConfig(srv))
	require.NoError(t, err)
	h := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, &osDriver{osSandbox: s})
	defer h.Close(context.Background())
	srv.Expire(h.ID())
	_, err = h.ExecuteCommand(context.Background(), "true", sandbox.ExecOptions{})
	assert.ErrorIs(t, err, ErrSandboxGone)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = h.ReadFile(context.Background(), "x")
	assert.ErrorIs(t, err, ErrSandboxGone)
	assert.NoError(t, h.Close(context.Background()), "closing a gone sandbox is not an error")
}

func TestThreadSandboxIsFoundAgain(t *testing.T) {
	srv := opensandboxtest.New(t)
	c := testConfig(srv)
	c.Thread, c.Keep = "thread-7", true
	ctx := context.Background()
	a, err := open(ctx, c)
	require.NoError(t, err)
	h := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, &osDriver{osSandbox: a})
	require.NoError(t, h.WriteFile(ctx, "note.txt", []byte("kept"), sandbox.WriteOptions{}))
	require.NoError(t, h.Close(ctx))
	assert.Equal(t, "Running", srv.Get(a.ID()).State, "Close keeps a thread's sandbox")
	assert.Equal(t, "thread-7", srv.Get(a.ID()).Metadata[LabelThread])

	require.NoError(t, a.lifecycle().pause(ctx, a.ID()))
	b, err := open(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, a.ID(), b.ID(), "the same thread finds its sandbox, resumed")
	got, err := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, &osDriver{osSandbox: b}).ReadFile(ctx, "note.txt")
	require.NoError(t, err)
	assert.Equal(t, "kept", string(got))

	c.Thread, c.Keep = "thread-8", false
	other, err := open(ctx, c)
	require.NoError(t, err)
	assert.NotEqual(t, a.ID(), other.ID(), "another thread gets its own sandbox")
	require.NoError(t, other.Close(ctx))
	require.NoError(t, b.Close(ctx))
	assert.Equal(t, 1, srv.Live(), "thread-7's sandbox is kept, thread-8's (shutdown policy delete) is not")
}

func TestTTLRenewedWhileOpen(t *testing.T) {
	srv := opensandboxtest.New(t)
	c := testConfig(srv)
	c.TTL, c.RenewEvery = 90*time.Second, 50*time.Millisecond
	s, err := open(context.Background(), c)
	require.NoError(t, err)
	first := *srv.Get(s.ID()).ExpiresAt
	time.Sleep(1200 * time.Millisecond)
	require.NoError(t, s.Close(context.Background()))
	sb := srv.Get(s.ID())
	assert.Positive(t, sb.Renewals)
	assert.True(t, sb.ExpiresAt.After(first), "expiry moved from %v to %v", first, sb.ExpiresAt)
	n := sb.Renewals
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, n, srv.Get(s.ID()).Renewals, "renewing stops at Close")
}

// TestConcurrentOpensOfOneThreadShareASandbox: without the Locker (the
// control, run by hand) all three runs of -count=3 created several
// sandboxes.
func TestConcurrentOpensOfOneThreadShareASandbox(t *testing.T) {
	srv := opensandboxtest.New(t)
	c := testConfig(srv)
	c.Thread, c.Keep = "busy", true
	c.Locker = orchestrator.NewFileStore(t.TempDir())
	ids := make(chan string, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := open(context.Background(), c)
			if assert.NoError(t, err) {
				ids <- s.ID()
				assert.NoError(t, s.Close(context.Background()))
			}
		}()
	}
	wg.Wait()
	close(ids)
	first := <-ids
	for id := range ids {
		assert.Equal(t, first, id)
	}
	assert.Equal(t, 1, srv.Live())
}
