package orchestrator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
)

// ErrNotCached is returned (wrapped, matching fs.ErrNotExist) by Release
// for a sandbox id this process does not hold.
var ErrNotCached = fmt.Errorf("aio: sandbox not held by this provider: %w", fs.ErrNotExist)

// InvalidThreadError rejects a thread id that is not ^[A-Za-z0-9_-]{1,64}$.
type InvalidThreadError struct{ ThreadID string }

func (e *InvalidThreadError) Error() string {
	return fmt.Sprintf("invalid thread id %q: want 1-64 characters of A-Z a-z 0-9 _ -", e.ThreadID)
}

// Provider is the orchestrating AIO provider: one sandbox per thread,
// shared by every process that uses the same backend and state store.
// Its methods are safe for concurrent use.
type Provider struct {
	o ProviderOptions

	mu        sync.RWMutex
	byThread  map[string]*entry
	bySandbox map[string]*entry

	locksMu sync.Mutex
	locks   map[string]*threadLock

	closed   atomic.Bool
	shutOnce sync.Once
	shutErr  error
	stopReap chan struct{}
	reapDone chan struct{}

	pool *pool // nil without a warm pool

	leaseMu sync.Mutex
	grantMu sync.Mutex // one owner lease grant at a time
	lease   *Lease     // the owner lease (nil: none yet, lost, or no Leaser)
	ownerID string     // the owner id in labels and state
	lives   int        // owner leases granted so far

	counter Counter // the store's, or this process's own

	sweepMu   sync.Mutex
	absent    map[string]time.Time // owner -> when a sweep first found no lease
	stopSweep chan struct{}
	sweepDone chan struct{}
}

type entry struct {
	info    SandboxInfo
	h       *aiodriver.Handle
	act     activity     // requests in flight and the last use
	checked atomic.Int64 // unix nanoseconds of the last liveness check
}

// DefaultLivenessInterval is how often a cache hit asks the backend
// whether the sandbox still runs (another process may have released it,
// or its container may be gone); in between, hits cost no backend call.
const DefaultLivenessInterval = 10 * time.Second

func (e *entry) touch()                           { e.act.touch() }
func (e *entry) idle(now time.Time) time.Duration { return e.act.idle(now) }

// NewProvider checks o, fills defaults and starts the idle reaper when
// IdleTimeout > 0.
func NewProvider(o ProviderOptions) (*Provider, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p := &Provider{o: o, byThread: map[string]*entry{}, bySandbox: map[string]*entry{},
		locks: map[string]*threadLock{}, stopReap: make(chan struct{}), reapDone: make(chan struct{}),
		ownerID: o.Owner, absent: map[string]time.Time{}, stopSweep: make(chan struct{}), sweepDone: make(chan struct{})}
	if c, ok := o.Store.(Counter); ok {
		p.counter = c
	} else {
		p.counter = &memCounter{}
	}
	if o.PoolSize > 0 {
		p.startPool()
	}
	if o.IdleTimeout > 0 {
		go p.reap()
	} else {
		close(p.reapDone)
	}
	if _, ok := o.Store.(Leaser); ok && o.SweepInterval > 0 {
		go p.sweepLoop()
	} else {
		close(p.sweepDone)
	}
	return p, nil
}

// Owner is this provider's owner id: ProviderOptions.Owner, or, after
// it lost an owner lease, the id of the one it holds now.
func (p *Provider) Owner() string { return p.owner() }

// Store is the provider's state store.
func (p *Provider) Store() StateStore { return p.o.Store }

// Backend is the provider's backend.
func (p *Provider) Backend() Backend { return p.o.Backend }

// SandboxIDFor is the deterministic sandbox id of a thread: the first 16
// hex digits (64 bits) of sha256(thread id).
func SandboxIDFor(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	return hex.EncodeToString(sum[:8])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cached is layer 1: a hit touches the entry. The touch happens under
// the read lock, and the reaper re-checks idleness under the write lock
// before it removes an entry, so a sandbox returned here is never one
// the reaper has already decided to release.
func (p *Provider) cached(threadID string) *entry {
	p.mu.RLock()
	defer p.mu.RUnlock()
	e := p.byThread[threadID]
	if e != nil {
		e.touch()
	}
	return e
}

// Acquire returns the id of the thread's sandbox, creating it if no
// process has one: (1) this process's cache; (2) under the state store's
// lock, the persisted record confirmed by the backend's Discover; (3) a
// new sandbox, destroyed again if it does not become ready. An empty
// thread id creates an anonymous sandbox with a random id and no saved
// state.
func (p *Provider) Acquire(ctx context.Context, threadID string) (string, error) {
	if p.closed.Load() {
		return "", fmt.Errorf("aio: acquire: %w", driver.ErrClosed)
	}
	if threadID == "" {
		ctx, err := p.leased(ctx)
		if err != nil {
			return "", fmt.Errorf("aio: acquire anonymous sandbox: %w", err)
		}
		return p.acquireAnonymous(ctx)
	}
	if !driver.ValidID(threadID) {
		return "", fmt.Errorf("aio: acquire: %w", &InvalidThreadError{ThreadID: threadID})
	}
	if e := p.cached(threadID); e != nil && e.act.lease.Err() == nil && p.alive(ctx, e) {
		return e.info.SandboxID, nil
	}
	ctx, err := p.leased(ctx)
	if err != nil {
		return "", fmt.Errorf("aio: acquire %s: %w", threadID, err)
	}
	unlock, err := p.lockThread(ctx, threadID)
	if err != nil {
		return "", fmt.Errorf("aio: acquire %s: %w", threadID, err)
	}
	defer unlock()
	if e := p.cached(threadID); e != nil && p.alive(ctx, e) {
		return e.info.SandboxID, nil
	}
	e, err := p.acquireLocked(ctx, threadID)
	if err != nil {
		return "", fmt.Errorf("aio: acquire %s: %w", threadID, err)
	}
	return e.info.SandboxID, nil
}

func (p *Provider) acquireLocked(ctx context.Context, threadID string) (*entry, error) {
	ctx, release, err := p.lockStore(ctx, threadID)
	if err != nil {
		return nil, err
	}
	defer release()
	if p.closed.Load() {
		return nil, driver.ErrClosed
	}
	sid := SandboxIDFor(threadID)
	e, err := p.recover(ctx, threadID, sid)
	if err != nil || e != nil {
		return e, err
	}
	return p.create(ctx, threadID, sid)
}

// recover is layer 2. It returns nil, nil when there is nothing to adopt
// (a stale record is removed).
func (p *Provider) recover(ctx context.Context, threadID, sid string) (*entry, error) {
	st, saved, err := p.o.Store.Load(ctx, threadID)
	if err != nil {
		return nil, err
	}
	if saved && st.SandboxID != "" && st.SandboxID != sid {
		p.retireLegacy(ctx, threadID, st)
	}
	found, ok, err := p.o.Backend.Discover(ctx, sid)
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", sid, err)
	}
	if !ok {
		if saved {
			p.o.Logger.Info("aio: removing stale sandbox state", "thread", threadID, "sandbox", st.SandboxID)
			return nil, p.o.Store.Remove(ctx, threadID)
		}
		return nil, nil
	}
	info := mergeInfo(found, st, saved, threadID)
	if info.Owner == "" || p.deadOwner(ctx, info.Owner) { // kept by a shut down owner, or its owner's lease ended: take it
		info.Owner = p.owner()
	}
	if a, ok := p.o.Backend.(Adopter); ok {
		if info, err = a.Adopt(ctx, info); err != nil {
			return nil, fmt.Errorf("adopt %s: %w", sid, err)
		}
	}
	e, err := p.ready(ctx, info)
	if err != nil && ctx.Err() != nil {
		return nil, err // our caller gave up: the sandbox may be fine for others
	}
	if err != nil && info.Owner != p.owner() { // another process's: it may just be slow
		return nil, fmt.Errorf("sandbox %s of owner %s is not usable, left to its owner (fix: sage sandbox rm %s): %w", sid, info.Owner, threadID, err)
	}
	if err != nil {
		if herr := stillHeld(ctx, threadID); herr != nil {
			return nil, herr
		}
		p.o.Logger.Warn("aio: discovered sandbox is not usable; replacing it", "thread", threadID, "sandbox", sid, "err", err)
		derr := p.destroy(ctx, info)
		return nil, errors.Join(derr, p.o.Store.Remove(ctx, threadID))
	}
	// Re-saved every time: the URL or container id may have changed, and
	// last_used_at tells `sage sandbox ls` when a process last took it.
	info.LastUsed = time.Now()
	e.info = info
	if err := stillHeld(ctx, threadID); err != nil {
		e.h.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := p.o.Store.Save(ctx, threadID, info); err != nil {
		e.h.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := p.cache(e); err != nil {
		e.h.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	p.o.Logger.Debug("aio: adopted sandbox", "thread", threadID, "sandbox", sid, "url", info.URL)
	return e, nil
}

// retireLegacy destroys the container of a record saved under another
// sandbox id (the original's 8-hex ids): the thread gets a new sandbox,
// and the old one must not run on with the thread's mounts.
func (p *Provider) retireLegacy(ctx context.Context, threadID string, st SandboxInfo) {
	old, ok, err := p.o.Backend.Discover(ctx, st.SandboxID)
	if err != nil || !ok {
		return
	}
	if stillHeld(ctx, threadID) != nil {
		return
	}
	p.o.Logger.Info("aio: retiring a sandbox saved under an old id", "thread", threadID, "sandbox", st.SandboxID)
	if err := p.destroy(ctx, old); err != nil {
		p.o.Logger.Warn("aio: retire old sandbox", "sandbox", st.SandboxID, "err", err)
	}
}

// alive reports whether a cached sandbox still runs, asking the backend
// at most once per LivenessInterval; a dead one is dropped from the
// cache. A backend error counts as alive (the next request will tell).
func (p *Provider) alive(ctx context.Context, e *entry) bool {
	now := time.Now().UnixNano()
	last := e.checked.Load()
	if now-last < int64(p.o.LivenessInterval) || !e.checked.CompareAndSwap(last, now) {
		return true
	}
	ok, err := p.o.Backend.IsAlive(ctx, e.info)
	if err != nil || ok {
		return true
	}
	p.o.Logger.Info("aio: cached sandbox is gone; acquiring again", "thread", e.info.ThreadID, "sandbox", e.info.SandboxID)
	p.forget(e)
	e.h.Close(context.WithoutCancel(ctx))
	return false
}

func mergeInfo(found, st SandboxInfo, saved bool, threadID string) SandboxInfo {
	info := found
	info.ThreadID = threadID
	if saved && st.SandboxID == found.SandboxID {
		if info.Token == "" {
			info.Token = st.Token
		}
		info.Owner = st.Owner // the store is authoritative: a keep shutdown clears it
		if info.CreatedAt.IsZero() {
			info.CreatedAt = st.CreatedAt
		}
	}
	if info.CreatedAt.IsZero() {
		info.CreatedAt = time.Now()
	}
	return info
}

// ready waits for the sandbox's API and opens a Handle on it.
func (p *Provider) ready(ctx context.Context, info SandboxInfo) (*entry, error) {
	rctx, cancel := context.WithTimeout(ctx, p.o.ReadyTimeout)
	defer cancel()
	if err := p.waitReady(rctx, info); err != nil {
		return nil, err
	}
	return p.open(rctx, info)
}

// errSandboxExited is returned (wrapped) when a sandbox stopped running
// before its API answered.
var errSandboxExited = errors.New("aio: the sandbox stopped before its API answered")

// exitCheckInterval is how often waitReady asks the backend whether the
// sandbox still runs.
const exitCheckInterval = 500 * time.Millisecond

// waitReady waits until the sandbox's API answers, and gives up as soon
// as the backend says it no longer runs: a container that exits at once
// is not waited on for the whole ready timeout.
func (p *Provider) waitReady(ctx context.Context, info SandboxInfo) error {
	wctx, stop := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(exitCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if alive, err := p.o.Backend.IsAlive(wctx, info); err == nil && !alive {
				stop(fmt.Errorf("sandbox %s: %w", info.SandboxID, errSandboxExited))
				return
			}
		}
	}()
	err := aioapi.WaitReady(wctx, info.URL, aioapi.ReadyOptions{Token: info.Token})
	cause := context.Cause(wctx)
	stop(nil)
	<-done
	if err != nil && errors.Is(cause, errSandboxExited) {
		return cause
	}
	return err
}

// open opens a Handle on a ready sandbox, its requests counted as the
// entry's activity.
func (p *Provider) open(ctx context.Context, info SandboxInfo) (*entry, error) {
	e := &entry{info: info}
	e.act.onUse = func() { p.touchBackend(e) }
	e.act.lease = ownerLeaseOf(ctx)
	e.touch()
	h, err := aiodriver.Open(ctx, aiodriver.OpenOptions{ServerURL: info.URL, Token: info.Token, SandboxID: info.SandboxID,
		Timeout: p.o.Timeout, Env: p.o.Env, Transport: e.act.transport(nil)})
	if err != nil {
		return nil, err
	}
	e.h = h
	return e, nil
}

// cache adds e, unless the provider was shut down (checked under the same
// lock Shutdown takes, so no entry slips in after Shutdown listed them).
func (p *Provider) cache(e *entry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return driver.ErrClosed
	}
	e.checked.Store(time.Now().UnixNano())
	if e.info.ThreadID != "" {
		p.byThread[e.info.ThreadID] = e
	}
	p.bySandbox[e.info.SandboxID] = e
	return nil
}

func (p *Provider) acquireAnonymous(ctx context.Context) (string, error) {
	sid := "anon-" + randomHex(8)
	e, err := p.create(ctx, "", sid)
	if err != nil {
		return "", fmt.Errorf("aio: acquire anonymous sandbox: %w", err)
	}
	return e.info.SandboxID, nil
}

// Get returns a sandbox this process holds and touches its last activity.
// The provider owns it: its Close does nothing; Release the sandbox
// instead.
func (p *Provider) Get(sandboxID string) (*sandbox.Sandbox, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	e := p.bySandbox[sandboxID]
	if e == nil {
		return nil, false
	}
	e.touch()
	return sandbox.NewFromDriver(driver.Config{Mode: driver.Remote}, sharedHandle{e.h}), true
}

// Info returns what the provider knows of a sandbox it holds.
func (p *Provider) Info(sandboxID string) (SandboxInfo, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	e := p.bySandbox[sandboxID]
	if e == nil {
		return SandboxInfo{}, false
	}
	return e.info, true
}
