package orchestrator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

// losingStore is a FileStore whose lock is lost as soon as it is taken
// (when lose is set).
type losingStore struct {
	*orchestrator.FileStore
	lose bool
}

func (s *losingStore) LockFenced(ctx context.Context, threadID string) (context.Context, func(), error) {
	unlock, err := s.Lock(ctx, threadID)
	if err != nil {
		return nil, nil, err
	}
	held, cancel := context.WithCancelCause(ctx)
	if s.lose {
		cancel(orchestrator.ErrLockLost)
	}
	return held, func() { cancel(context.Canceled); unlock() }, nil
}

// Issue 15, fault 4: a holder whose lock is lost creates, destroys and
// saves nothing. The control (lock kept) creates.
func TestLostLockStopsTheHolder(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	st := &losingStore{FileStore: orchestrator.NewFileStore(home), lose: true}
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Store: st})
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	_, err = p.Acquire(context.Background(), "t1")
	require.ErrorIs(t, err, orchestrator.ErrLockLost)
	assert.Zero(t, b.Creates(), "created under a lost lock")

	st.lose = false
	sid, err := p.Acquire(context.Background(), "t1")
	require.NoError(t, err, "control")
	assert.Equal(t, 1, b.Creates())

	st.lose = true
	p2, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Store: st})
	require.NoError(t, err)
	t.Cleanup(func() { p2.Shutdown(context.Background()) })
	require.ErrorIs(t, p2.ReleaseThread(context.Background(), "t1"), orchestrator.ErrLockLost)
	assert.Equal(t, 1, b.Running(), "destroyed under a lost lock")
	_, ok := p.Info(sid)
	assert.True(t, ok)
}

// touchingBackend records Touch calls (as the provisioner client does).
type touchingBackend struct {
	*orchestratortest.Backend
	touches atomic.Int32
}

func (b *touchingBackend) Touch(context.Context, string) error { b.touches.Add(1); return nil }

// Issue 15, fault 2 (Kubernetes path): using a sandbox touches a Toucher
// backend; an unused one is not touched.
func TestUseTouchesBackend(t *testing.T) {
	b := &touchingBackend{Backend: newFakeBackend(t)}
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: t.TempDir(), TouchInterval: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	sid, err := p.Acquire(context.Background(), "t1")
	require.NoError(t, err)
	h, _ := p.Get(sid)
	time.Sleep(20 * time.Millisecond)
	before := b.touches.Load()
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, before, b.touches.Load(), "control: no use, no touch")
	_, err = h.ExecuteCommand(context.Background(), "true", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return b.touches.Load() > before }, 2*time.Second, 10*time.Millisecond)
}

// chattyServer answers /v1/bash/exec with "running" and then `chunks`
// outputs of 64 KiB before "completed"; it counts sessions created and
// closed.
type chattyServer struct {
	chunks          int
	mu              sync.Mutex
	created, closed int
	served          map[string]int
}

func (s *chattyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(data any) {
		_ = json.NewEncoder(w).Encode(map[string]any{"success": true, "data": data})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.URL.Path == "/v1/sandbox":
		_ = json.NewEncoder(w).Encode(map[string]any{"home_dir": "/home/u", "workspace": "/home/u/ws"})
	case r.URL.Path == "/v1/bash/sessions/create":
		s.created++
		reply(map[string]any{"session_id": "s" + string(rune('a'+s.created))})
	case strings.HasSuffix(r.URL.Path, "/close"):
		s.closed++
		reply(nil)
	case r.URL.Path == "/v1/bash/exec":
		reply(map[string]any{"session_id": "s", "command_id": "c", "status": "running", "stdout": "", "stderr": ""})
	case r.URL.Path == "/v1/bash/output":
		s.served["c"]++
		if s.served["c"] > s.chunks {
			code := 0
			reply(map[string]any{"session_id": "s", "stdout": "", "stderr": "", "offset": 0,
				"command": map[string]any{"command_id": "c", "status": "completed", "exit_code": code}})
			return
		}
		reply(map[string]any{"session_id": "s", "stdout": strings.Repeat("x", 64<<10), "stderr": "", "offset": s.served["c"] * 64 << 10,
			"command": map[string]any{"command_id": "c", "status": "running"}})
	default:
		reply(nil)
	}
}

// Issue 15, fault 5: output followed over many polls is bounded by
// OutputLimit (head and tail, with the dropped count), not appended
// without end.
func TestFollowedOutputIsBounded(t *testing.T) {
	srv := &chattyServer{chunks: 64, served: map[string]int{}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	h, err := aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: ts.URL, Token: "t"})
	require.NoError(t, err)
	defer h.Close(context.Background())
	res, err := h.Exec(context.Background(), driver.ExecSpec{Command: "talk", ExecOptions: sandbox.ExecOptions{OutputLimit: 2000}})
	require.NoError(t, err)
	assert.Less(t, len(res.Stdout), 2000, "the output limit was ignored")
	assert.True(t, res.Truncated)
	assert.Equal(t, int64(64*64<<10-1000), res.StdoutDroppedBytes)
}

// Issue 15, fault 5: a shell lane whose creation races Close is closed,
// not leaked on the server.
func TestLaneCreatedDuringCloseIsClosed(t *testing.T) {
	srv := &chattyServer{chunks: 0, served: map[string]int{}}
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/bash/sessions/create" {
			time.Sleep(200 * time.Millisecond)
		}
		srv.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(slow)
	defer ts.Close()
	h, err := aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: ts.URL, Token: "t"})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := h.Exec(context.Background(), driver.ExecSpec{Command: "x"})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the lane is being created
	require.NoError(t, h.Close(context.Background()))
	<-done
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.created == srv.closed
	}, 5*time.Second, 20*time.Millisecond, "a session created during Close leaked")
	srv.mu.Lock()
	assert.Equal(t, 1, srv.created, "control: one lane was created")
	srv.mu.Unlock()
}
