package orchestrator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/unfenced"
)

// Toucher is implemented by backends whose own idle reaper must be told
// about activity (the provisioner client: its Kubernetes backend reaps
// sandboxes nobody touched). The provider calls it, at most once per
// TouchInterval per sandbox, while the sandbox is used.
type Toucher interface {
	Touch(ctx context.Context, sandboxID string) error
}

// DefaultTouchInterval is how often, at most, a used sandbox is touched
// on a Toucher backend.
const DefaultTouchInterval = 30 * time.Second

// activity counts a sandbox's use: every request of its Handle is
// in flight from RoundTrip until its body is closed, and refreshes the
// last-use time at both ends. The reaper spares a sandbox with requests
// in flight, so a command longer than the idle timeout is not killed.
type activity struct {
	last     atomic.Int64 // unix nanoseconds of the last use
	inFlight atomic.Int64
	touched  atomic.Int64 // unix nanoseconds of the last backend Touch
	onUse    func()       // called (without blocking) on each request
	// lease is the owner lease the sandbox was taken under: once it has
	// ended no request is sent, and those in flight are cancelled.
	lease *Lease
}

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

func (a *activity) idle(now time.Time) time.Duration {
	if a.inFlight.Load() > 0 {
		return 0
	}
	return now.Sub(time.Unix(0, a.last.Load()))
}

// transport wraps rt so that each request counts as activity.
func (a *activity) transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = aioapi.NewTransport()
	}
	return &activityTransport{rt: rt, a: a}
}

type activityTransport struct {
	rt http.RoundTripper
	a  *activity
}

func (t *activityTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	stopLease := func() bool { return false }
	if l := t.a.lease; l != nil && !unfenced.Off.Load() {
		if err := l.Err(); err != nil {
			return nil, fmt.Errorf("aio: %s %s: %w", req.Method, req.URL.Path, err)
		}
		ctx, cancel := context.WithCancelCause(req.Context())
		stop := context.AfterFunc(l.Context(), func() { cancel(l.Err()) })
		stopLease = func() bool { cancel(nil); return stop() }
		req = req.WithContext(ctx)
	}
	t.a.inFlight.Add(1)
	t.a.touch()
	if t.a.onUse != nil {
		t.a.onUse()
	}
	var once sync.Once
	done := func() { once.Do(func() { stopLease(); t.a.touch(); t.a.inFlight.Add(-1) }) }
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &activityBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

type activityBody struct {
	io.ReadCloser
	done func()
}

func (b *activityBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// touchBackend tells a Toucher backend that e is in use, at most once
// per TouchInterval, in the background with its own deadline.
func (p *Provider) touchBackend(e *entry) {
	t, ok := p.o.Backend.(Toucher)
	if !ok {
		return
	}
	now := time.Now().UnixNano()
	last := e.act.touched.Load()
	if now-last < int64(p.o.TouchInterval) || !e.act.touched.CompareAndSwap(last, now) {
		return
	}
	// The id is read here, not in the goroutine: the first touch comes
	// from the open's own request, and a recovery then rewrites e.info
	// (a data race that -race caught on the real node).
	sid := e.info.SandboxID
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := t.Touch(ctx, sid); err != nil {
			p.o.Logger.Debug("aio: touch sandbox", "sandbox", sid, "err", err)
		}
	}()
}

// busyTasks reports whether any background task of e may still run
// (asked of the server, bounded by ctx); the reaper spares such a
// sandbox. An error counts as busy: a live sandbox is not killed on a
// failed status read.
func (e *entry) busyTasks(ctx context.Context) bool {
	return e.h.RunningTasks(ctx) > 0
}
