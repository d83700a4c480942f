package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// pool is the warm pool: PoolSize started, ready, unassigned sandboxes
// of this process. A slot leaves idle under mu, so it is handed to one
// thread only; claimed slots are refilled in the background.
type pool struct {
	mu      sync.Mutex
	idle    []SandboxInfo
	filling int
	closed  bool

	changed chan struct{} // closed and replaced when idle grows
	kick    chan struct{} // a slot was claimed (buffered, 1)
	stop    chan struct{}
	done    chan struct{}
}

// PoolStats counts the warm pool of a Provider.
type PoolStats struct {
	Size    int // the configured pool_size
	Idle    int // started, ready and unclaimed
	Filling int // being started
}

// Pool reports the warm pool's state (zero without a pool).
func (p *Provider) Pool() PoolStats {
	if p.pool == nil {
		return PoolStats{}
	}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return PoolStats{Size: p.o.PoolSize, Idle: len(p.pool.idle), Filling: p.pool.filling}
}

// WaitPool blocks until at least n pool sandboxes are idle (at most
// pool_size), e.g. to warm up before serving; it fails when ctx ends or
// the provider has no pool or shuts down.
func (p *Provider) WaitPool(ctx context.Context, n int) error {
	if p.pool == nil {
		return fmt.Errorf("aio: wait for the warm pool: pool_size is 0")
	}
	n = min(n, p.o.PoolSize)
	for {
		p.pool.mu.Lock()
		idle, closed, ch := len(p.pool.idle), p.pool.closed, p.pool.changed
		p.pool.mu.Unlock()
		switch {
		case idle >= n:
			return nil
		case closed:
			return fmt.Errorf("aio: wait for the warm pool: %w", driver.ErrClosed)
		}
		select {
		case <-ch:
		case <-p.pool.stop:
		case <-ctx.Done():
			return fmt.Errorf("aio: wait for the warm pool (%d of %d idle): %w", idle, n, ctx.Err())
		}
	}
}

func (p *Provider) startPool() {
	p.pool = &pool{changed: make(chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.fill()
}

// fill keeps the pool at PoolSize until Shutdown, one sandbox at a time,
// waiting (doubling up to 30 s) after a failure.
func (p *Provider) fill() {
	defer close(p.pool.done)
	backoff := time.Second
	for {
		for p.reserveSlot() {
			info, err := p.newSlot(context.Background())
			if !p.addSlot(info, err) {
				break
			}
			if errors.Is(err, ErrTooManySandboxes) { // full: wait for a release (or look again in a while)
				if !p.wait(5*time.Second, true) {
					return
				}
				continue
			}
			if err != nil {
				p.o.Logger.Warn("aio: warm pool: starting a sandbox failed", "err", err, "retry_in", backoff)
				if !p.wait(backoff, false) {
					return
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			backoff = time.Second
		}
		select {
		case <-p.pool.stop:
			return
		case <-p.pool.kick:
		}
	}
}

// wait waits d, or less when kick is set and a sandbox was released
// meanwhile; it reports false when the pool stops.
func (p *Provider) wait(d time.Duration, kick bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var kicked <-chan struct{}
	if kick {
		kicked = p.pool.kick
	}
	select {
	case <-p.pool.stop:
		return false
	case <-kicked:
		return true
	case <-t.C:
		return true
	}
}

// reserveSlot counts one more slot as filling if the pool is short
// (max_sandboxes is checked by newSlot's count).
func (p *Provider) reserveSlot() bool {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	n := len(p.pool.idle) + p.pool.filling
	if p.pool.closed || n >= p.o.PoolSize {
		return false
	}
	p.pool.filling++
	return true
}

// addSlot ends a reservation: a started slot joins idle, unless the pool
// closed meanwhile, or the slot was started under an owner lease this
// process has lost since (then it is destroyed). It reports whether to
// go on.
func (p *Provider) addSlot(info SandboxInfo, err error) bool {
	stale := err == nil && info.Owner != p.owner() // started under a lease since lost
	p.pool.mu.Lock()
	p.pool.filling--
	closed := p.pool.closed
	if err == nil && !closed && !stale {
		p.pool.idle = append(p.pool.idle, info)
		close(p.pool.changed)
		p.pool.changed = make(chan struct{})
	}
	p.pool.mu.Unlock()
	if err == nil && (closed || stale) {
		if derr := p.destroy(context.Background(), info); derr != nil {
			p.o.Logger.Warn("aio: warm pool: destroy", "sandbox", info.SandboxID, "err", derr)
		}
	}
	return !closed
}

// newSlot starts one pool sandbox with an empty slot directory bound at
// /mnt/user-data and waits until its API answers; on failure nothing is
// left behind.
func (p *Provider) newSlot(ctx context.Context) (SandboxInfo, error) {
	ctx, err := p.leased(ctx)
	if err != nil {
		return SandboxInfo{}, err
	}
	sid := "pool-" + randomHex(8)
	if err := p.reserve(ctx, sid); err != nil {
		return SandboxInfo{}, err
	}
	mounts, err := p.slotMounts(sid)
	if err != nil {
		p.unreserve(ctx, sid)
		return SandboxInfo{}, err
	}
	req := p.request("", sid, mounts)
	req.PoolSlot = sid
	info, err := p.o.Backend.Create(ctx, req)
	if err != nil {
		p.unreserveFailed(ctx, sid)
		return SandboxInfo{}, errors.Join(fmt.Errorf("create pool sandbox %s: %w", sid, err), p.removeSlot(sid))
	}
	info.SandboxID, info.PoolSlot, info.ThreadID = sid, sid, ""
	if info.Owner == "" {
		info.Owner = p.owner()
	}
	if info.Token == "" {
		info.Token = req.Token
	}
	if info.CreatedAt.IsZero() {
		info.CreatedAt = time.Now()
	}
	rctx, cancel := context.WithTimeout(ctx, p.o.ReadyTimeout)
	defer cancel()
	if err := p.waitReady(rctx, info); err != nil {
		return SandboxInfo{}, errors.Join(fmt.Errorf("pool sandbox %s: %w", sid, err), p.destroy(ctx, info))
	}
	return info, nil
}

// takeSlot removes one idle slot from the pool (nil: none) and asks the
// filler for a new one.
func (p *Provider) takeSlot() (SandboxInfo, bool) {
	if p.pool == nil {
		return SandboxInfo{}, false
	}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	if len(p.pool.idle) == 0 || p.pool.closed {
		return SandboxInfo{}, false
	}
	info := p.pool.idle[len(p.pool.idle)-1]
	p.pool.idle = p.pool.idle[:len(p.pool.idle)-1]
	p.kickPool()
	return info, true
}

// kickPool asks the filler to top the pool up (a slot was claimed, or a
// sandbox released under max_sandboxes).
func (p *Provider) kickPool() {
	if p.pool == nil {
		return
	}
	select {
	case p.pool.kick <- struct{}{}:
	default:
	}
}

// claim gives the thread a pool sandbox: its files are moved into the
// slot directory, the backend renames the sandbox to the thread's id,
// and a Handle is opened. It returns nil when no slot is idle or the
// claim failed (the slot is then destroyed and the caller creates a
// sandbox as without a pool).
func (p *Provider) claim(ctx context.Context, threadID, sid string) *entry {
	slot, ok := p.takeSlot()
	if !ok {
		return nil
	}
	e, err := p.claimSlot(ctx, slot, threadID, sid)
	if err != nil {
		p.o.Logger.Warn("aio: warm pool: claim failed; creating a sandbox instead", "thread", threadID, "slot", slot.SandboxID, "err", err)
		return nil
	}
	p.o.Logger.Debug("aio: claimed pool sandbox", "thread", threadID, "sandbox", sid, "slot", slot.SandboxID)
	return e
}

func (p *Provider) claimSlot(ctx context.Context, slot SandboxInfo, threadID, sid string) (*entry, error) {
	if err := p.attachSlot(threadID, slot.PoolSlot); err != nil {
		return nil, errors.Join(err, p.destroy(ctx, slot))
	}
	slot.ThreadID = threadID // from here on, destroy moves the files back
	info, err := p.o.Backend.(Pooler).Claim(ctx, slot, sid, threadID)
	if err != nil {
		return nil, errors.Join(err, p.destroy(ctx, slot))
	}
	info.SandboxID, info.ThreadID, info.PoolSlot, info.Owner = sid, threadID, slot.PoolSlot, p.owner()
	if info.Token == "" {
		info.Token = slot.Token
	}
	if info.URL == "" {
		info.URL = slot.URL
	}
	info.CreatedAt, info.LastUsed = slot.CreatedAt, time.Now()
	rctx, cancel := context.WithTimeout(ctx, p.o.ReadyTimeout)
	defer cancel()
	e, err := p.open(rctx, info)
	if err != nil {
		return nil, errors.Join(err, p.destroy(ctx, info))
	}
	return e, nil
}

// stopPool stops the filler and destroys the idle slots (Shutdown).
func (p *Provider) stopPool(ctx context.Context) error {
	if p.pool == nil {
		return nil
	}
	p.pool.mu.Lock()
	p.pool.closed = true
	idle := p.pool.idle
	p.pool.idle = nil
	p.pool.mu.Unlock()
	close(p.pool.stop)
	var errs []error
	for _, info := range idle {
		errs = append(errs, p.destroy(ctx, info))
	}
	select {
	case <-p.pool.done: // a slot being started is destroyed by addSlot
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("aio: shutdown: waiting for the warm pool: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

func (o *ProviderOptions) checkPool() error {
	if o.PoolSize < 0 {
		return &driver.ConfigError{Field: "pool_size", Value: fmt.Sprint(o.PoolSize), Reason: "must not be negative (0 disables the warm pool)"}
	}
	if o.MaxSandboxes < 0 {
		return &driver.ConfigError{Field: "max_sandboxes", Value: fmt.Sprint(o.MaxSandboxes), Reason: "must not be negative (0 means no limit)"}
	}
	if o.MaxSandboxes > 0 && o.PoolSize > o.MaxSandboxes {
		return &driver.ConfigError{Field: "pool_size", Value: fmt.Sprint(o.PoolSize),
			Reason: fmt.Sprintf("larger than max_sandboxes (%d); lower pool_size or raise max_sandboxes", o.MaxSandboxes)}
	}
	if _, ok := o.Backend.(Pooler); o.PoolSize > 0 && !ok {
		return &driver.ConfigError{Field: "pool_size", Value: fmt.Sprint(o.PoolSize), Reason: fmt.Sprintf("the backend %T cannot keep a warm pool; set pool_size to 0", o.Backend)}
	}
	return nil
}
