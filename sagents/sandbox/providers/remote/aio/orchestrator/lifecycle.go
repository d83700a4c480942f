package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// threadLock is a per-thread mutex whose waits honour a context. Locks
// are reference-counted and dropped from the map when nobody holds or
// waits for them, so the map never grows with the threads seen (the
// original kept one lock per thread forever).
type threadLock struct {
	ch   chan struct{}
	refs int
}

func (p *Provider) lockThread(ctx context.Context, threadID string) (func(), error) {
	p.locksMu.Lock()
	l := p.locks[threadID]
	if l == nil {
		l = &threadLock{ch: make(chan struct{}, 1)}
		p.locks[threadID] = l
	}
	l.refs++
	p.locksMu.Unlock()
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; p.unref(threadID, l) }, nil
	case <-ctx.Done():
		p.unref(threadID, l)
		return nil, ctx.Err()
	}
}

func (p *Provider) unref(threadID string, l *threadLock) {
	p.locksMu.Lock()
	defer p.locksMu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(p.locks, threadID)
	}
}

// threadLocks is how many per-thread locks exist (for tests).
func (p *Provider) threadLocks() int {
	p.locksMu.Lock()
	defer p.locksMu.Unlock()
	return len(p.locks)
}

// Release destroys a sandbox this process holds and forgets its state.
// A sandbox id it does not hold is an error matching fs.ErrNotExist (use
// ReleaseThread for those).
func (p *Provider) Release(ctx context.Context, sandboxID string) error {
	p.mu.RLock()
	e := p.bySandbox[sandboxID]
	p.mu.RUnlock()
	if e == nil {
		return fmt.Errorf("aio: release %s: %w", sandboxID, ErrNotCached)
	}
	if e.info.ThreadID == "" {
		p.forget(e)
		return p.releaseEntry(ctx, e)
	}
	return p.ReleaseThread(ctx, e.info.ThreadID)
}

// ReleaseThread destroys the thread's sandbox wherever it was created
// (this process or another), under both locks, and removes its state.
// Releasing a thread that has no sandbox is not an error.
func (p *Provider) ReleaseThread(ctx context.Context, threadID string) error {
	if !driver.ValidID(threadID) {
		return fmt.Errorf("aio: release: %w", &InvalidThreadError{ThreadID: threadID})
	}
	return p.withThreadLocks(ctx, "release", threadID, func(context.Context) error { return nil })
}

// withThreadLocks releases the thread's sandbox under both locks (this
// process's and the state store's), as ReleaseThread does, and then runs
// f under them.
func (p *Provider) withThreadLocks(ctx context.Context, op, threadID string, f func(held context.Context) error) error {
	unlock, err := p.lockThread(ctx, threadID)
	if err != nil {
		return fmt.Errorf("aio: %s %s: %w", op, threadID, err)
	}
	defer unlock()
	p.mu.RLock()
	e := p.byThread[threadID]
	p.mu.RUnlock()
	if e != nil {
		p.forget(e)
		e.h.Close(context.WithoutCancel(ctx))
	}
	held, unlockStore, err := p.lockStore(ctx, threadID)
	if err != nil {
		return fmt.Errorf("aio: %s %s: %w", op, threadID, err)
	}
	defer unlockStore()
	if err := p.releaseHeld(held, threadID); err != nil {
		return fmt.Errorf("aio: %s %s: %w", op, threadID, err)
	}
	if err := f(held); err != nil {
		return fmt.Errorf("aio: %s %s: %w", op, threadID, err)
	}
	return nil
}

func (p *Provider) releaseStored(ctx context.Context, threadID string) error {
	ctx, unlock, err := p.lockStore(ctx, threadID)
	if err != nil {
		return err
	}
	defer unlock()
	return p.releaseHeld(ctx, threadID)
}

// releaseHeld destroys the thread's sandbox and removes its state; ctx
// holds the state store's lock.
func (p *Provider) releaseHeld(ctx context.Context, threadID string) error {
	sid := SandboxIDFor(threadID)
	info, found, err := p.o.Backend.Discover(ctx, sid)
	if err != nil {
		return err
	}
	if err := stillHeld(ctx, threadID); err != nil {
		return err
	}
	if found {
		info.ThreadID = threadID // a claimed pool sandbox's labels do not say
		if err := p.destroy(ctx, info); err != nil {
			return err
		}
	}
	return p.o.Store.Remove(ctx, threadID)
}

// forget drops e from the cache (if it is still the cached entry).
func (p *Provider) forget(e *entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetLocked(e)
}

func (p *Provider) forgetLocked(e *entry) {
	if p.bySandbox[e.info.SandboxID] == e {
		delete(p.bySandbox, e.info.SandboxID)
	}
	if t := e.info.ThreadID; t != "" && p.byThread[t] == e {
		delete(p.byThread, t)
	}
	p.kickPool()
}

// releaseEntry closes e's handle and destroys an anonymous sandbox.
func (p *Provider) releaseEntry(ctx context.Context, e *entry) error {
	cerr := e.h.Close(context.WithoutCancel(ctx))
	return errors.Join(p.destroy(ctx, e.info), ignoreClosed(cerr))
}

func ignoreClosed(err error) error {
	if errors.Is(err, driver.ErrClosed) {
		return nil
	}
	return err
}

// reap releases sandboxes idle for longer than IdleTimeout, every
// ReapInterval, until Shutdown.
func (p *Provider) reap() { every(p.o.ReapInterval, p.stopReap, p.reapDone, p.reapOnce) }

// every runs pass every interval until stop is closed (which also
// cancels a pass under way), then closes done.
func every(interval time.Duration, stop <-chan struct{}, done chan<- struct{}, pass func(context.Context)) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			pass(ctx)
		}
	}
}

// reapOnce releases every idle sandbox. Each one is re-checked under its
// thread lock and the cache's write lock, so one touched during the scan
// survives.
func (p *Provider) reapOnce(ctx context.Context) {
	for _, e := range p.idleEntries(time.Now()) {
		if err := p.reapEntry(ctx, e); err != nil {
			p.o.Logger.Warn("aio: idle release failed", "sandbox", e.info.SandboxID, "err", err)
		}
	}
}

func (p *Provider) idleEntries(now time.Time) []*entry {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []*entry
	for _, e := range p.bySandbox {
		if e.idle(now) > p.o.IdleTimeout {
			out = append(out, e)
		}
	}
	return out
}

func (p *Provider) reapEntry(ctx context.Context, e *entry) error {
	tid := e.info.ThreadID
	if tid != "" {
		unlock, err := p.lockThread(ctx, tid)
		if err != nil {
			return err
		}
		defer unlock()
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	busy := e.busyTasks(tctx)
	cancel()
	if busy { // a background task runs: that is use
		e.touch()
		return nil
	}
	if !p.forgetIfIdle(e) {
		return nil
	}
	if !p.owns(e) { // another process created it and may be using it
		p.o.Logger.Info("aio: dropping idle sandbox owned by another process", "thread", tid, "sandbox", e.info.SandboxID, "owner", e.info.Owner)
		return ignoreClosed(e.h.Close(context.WithoutCancel(ctx)))
	}
	p.o.Logger.Info("aio: releasing idle sandbox", "thread", tid, "sandbox", e.info.SandboxID)
	var err error
	if tid == "" {
		err = p.destroy(ctx, e.info)
	} else {
		err = p.releaseStored(ctx, tid)
	}
	if err != nil {
		// Still ours and still running: back in the cache, where the
		// next pass or Shutdown (which waits for this one before it
		// lists the cache) releases it.
		p.restore(e)
		return err
	}
	return ignoreClosed(e.h.Close(context.WithoutCancel(ctx)))
}

// restore puts back an entry the reaper forgot but could not release,
// unless another entry took its place meanwhile.
func (p *Provider) restore(e *entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bySandbox[e.info.SandboxID] != nil {
		return
	}
	p.bySandbox[e.info.SandboxID] = e
	if t := e.info.ThreadID; t != "" && p.byThread[t] == nil {
		p.byThread[t] = e
	}
}

// owns reports whether this process owns the sandbox: it created it, or
// adopted it unclaimed or from an owner whose lease had ended (the owner
// id is in the saved state; the creator's is also in the container's
// labels). A crashed process's sandboxes are taken over by the next
// Acquire of their thread, or collected by a sweep.
func (p *Provider) owns(e *entry) bool { return e.info.Owner == "" || e.info.Owner == p.owner() }

func (p *Provider) forgetIfIdle(e *entry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bySandbox[e.info.SandboxID] != e || e.idle(time.Now()) <= p.o.IdleTimeout {
		return false
	}
	p.forgetLocked(e)
	return true
}

// Shutdown stops the reaper and, with PolicyRelease, releases every
// sandbox this process created (sandboxes adopted from another process
// are only let go: their owner may still use them); with PolicyKeep it only
// closes their handles and leaves them (and their state) to other
// processes. It is idempotent; later calls return the first's result.
// Installing signal handlers that call it is the application's choice.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.shutOnce.Do(func() {
		p.mu.Lock()
		p.closed.Store(true)
		p.mu.Unlock()
		close(p.stopReap)
		close(p.stopSweep)
		for _, w := range []struct {
			done <-chan struct{}
			what string
		}{{p.reapDone, "the reaper"}, {p.sweepDone, "the sweep"}} {
			select {
			case <-w.done:
			case <-ctx.Done():
				p.shutErr = fmt.Errorf("aio: shutdown: waiting for %s: %w", w.what, ctx.Err())
				return
			}
		}
		p.shutErr = errors.Join(p.stopPool(ctx), p.shutdownEntries(ctx))
		if l := p.ownerLease(); l != nil {
			l.Release() // others may collect what this process kept anonymous
		}
	})
	return p.shutErr
}

func (p *Provider) shutdownEntries(ctx context.Context) error {
	p.mu.Lock()
	entries := make([]*entry, 0, len(p.bySandbox))
	for _, e := range p.bySandbox {
		entries = append(entries, e)
	}
	p.mu.Unlock()
	var errs []error
	for _, e := range entries {
		if p.o.ShutdownPolicy == PolicyKeep {
			p.forget(e)
			errs = append(errs, ignoreClosed(e.h.Close(ctx)), p.disown(ctx, e))
			continue
		}
		var err error
		switch {
		case !p.owns(e): // adopted from another process: leave it to its owner
			p.forget(e)
			err = ignoreClosed(e.h.Close(ctx))
		case e.info.ThreadID == "":
			p.forget(e)
			err = p.releaseEntry(ctx, e)
		default:
			err = p.ReleaseThread(ctx, e.info.ThreadID)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// disown clears this process's claim on a kept sandbox in the state
// store, so the next process that adopts it owns it (and may release it).
func (p *Provider) disown(ctx context.Context, e *entry) error {
	tid := e.info.ThreadID
	if tid == "" || !p.owns(e) {
		return nil
	}
	ctx, unlock, err := p.lockStore(ctx, tid)
	if err != nil {
		return fmt.Errorf("aio: disown %s: %w", tid, err)
	}
	defer unlock()
	st, ok, err := p.o.Store.Load(ctx, tid)
	if err != nil || !ok || st.SandboxID != e.info.SandboxID || st.Owner != p.owner() {
		return err
	}
	st.Owner = ""
	return p.o.Store.Save(ctx, tid, st)
}
