package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/unfenced"
)

// owner is this process's current owner id: ProviderOptions.Owner for
// its first owner lease, a new one after each lease it lost (what the
// old one owned may be collected by then).
func (p *Provider) owner() string {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	return p.ownerID
}

// ownerLease is the owner lease held now (nil: none yet, lost, or a store
// that keeps none).
func (p *Provider) ownerLease() *Lease {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	return p.lease
}

// leased returns ctx carrying this process's owner lease, for work that
// creates, adopts or claims sandboxes (they are labelled with its owner
// id). The lease is granted on first use, and again under a new owner id
// after one was lost; losing one drops, first, everything this process
// held under it. A store without Leaser keeps no leases: ctx as is.
func (p *Provider) leased(ctx context.Context) (context.Context, error) {
	lr, ok := p.o.Store.(Leaser)
	if !ok {
		return ctx, nil
	}
	if l := p.ownerLease(); l != nil {
		if err := l.Err(); err == nil || unfenced.Off.Load() {
			return WithLease(ctx, l), nil
		}
		p.lost(l)
	}
	p.grantMu.Lock()
	defer p.grantMu.Unlock()
	if l := p.ownerLease(); l != nil && l.Err() == nil { // granted while we waited
		return WithLease(ctx, l), nil
	}
	if p.closed.Load() {
		return nil, driver.ErrClosed
	}
	p.leaseMu.Lock()
	id := p.o.Owner
	if p.lives > 0 {
		base := p.o.Owner
		if len(base) > 54 {
			base = base[:54]
		}
		id = fmt.Sprintf("%s-%d", base, p.lives)
	}
	p.leaseMu.Unlock()
	l, err := lr.GrantLease(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("aio: owner lease: %w", err)
	}
	p.leaseMu.Lock()
	p.lives++
	p.lease, p.ownerID = l, id
	p.leaseMu.Unlock()
	go p.watchLease(l)
	return WithLease(ctx, l), nil
}

// watchLease stops this process's use of what it holds once l ends
// (unless it was released, or fencing is off for a fault test's
// control).
func (p *Provider) watchLease(l *Lease) {
	<-l.Done()
	if l.released() || unfenced.Off.Load() {
		return
	}
	p.lost(l)
}

// lost handles the end of owner lease l once: every handle is closed (a
// request in flight is cancelled by the transport), the cache and the
// idle pool are emptied, and the anonymous and pool sandboxes, which
// nobody else uses, are destroyed. Thread sandboxes are left running:
// another process may share them, and the next Acquire, here or
// elsewhere, takes them over (or a sweep collects them).
func (p *Provider) lost(l *Lease) {
	p.leaseMu.Lock()
	if p.lease != l {
		p.leaseMu.Unlock()
		return
	}
	p.lease = nil
	id := p.ownerID
	p.leaseMu.Unlock()
	p.o.Logger.Warn("aio: owner lease lost; this process stops using its sandboxes", "owner", id, "err", l.Err())
	p.mu.Lock()
	var entries []*entry
	for _, e := range p.bySandbox {
		entries = append(entries, e)
	}
	clear(p.bySandbox)
	clear(p.byThread)
	p.mu.Unlock()
	var idle []SandboxInfo
	if p.pool != nil {
		p.pool.mu.Lock()
		idle, p.pool.idle = p.pool.idle, nil
		p.pool.mu.Unlock()
		p.kickPool()
	}
	ctx := context.Background() // no lease: these are ours alone
	for _, e := range entries {
		_ = e.h.Close(ctx)
		if e.info.ThreadID == "" {
			idle = append(idle, e.info)
		}
	}
	for _, info := range idle {
		if err := p.destroy(ctx, info); err != nil {
			p.o.Logger.Warn("aio: after losing the owner lease", "sandbox", info.SandboxID, "err", err)
		}
	}
}

// deadOwner reports whether owner's lease has ended (a lease-keeping
// store says so; an error, or an owner the store does not know, counts
// as alive).
func (p *Provider) deadOwner(ctx context.Context, owner string) bool {
	lr, ok := p.o.Store.(Leaser)
	if !ok || owner == "" || owner == p.owner() {
		return false
	}
	live, err := lr.LiveLeases(ctx, []string{owner})
	held, known := live[owner]
	return err == nil && known && !held
}

// memCounter counts this process's sandboxes for max_sandboxes when the
// store cannot count the deployment's.
type memCounter struct {
	mu  sync.Mutex
	ids map[string]string
}

func (c *memCounter) Reserve(_ context.Context, id, owner string, max int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]string{}
	}
	if _, ok := c.ids[id]; !ok && max > 0 && len(c.ids) >= max {
		return fmt.Errorf("%w: this process counts %d of %d (release one, or raise max_sandboxes)", ErrTooManySandboxes, len(c.ids), max)
	}
	c.ids[id] = owner
	return nil
}

func (c *memCounter) Unreserve(_ context.Context, id, owner string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.ids[id]; ok && (owner == "" || o == owner) {
		delete(c.ids, id)
	}
	return nil
}

func (c *memCounter) Reserved(context.Context) (map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.ids))
	for k, v := range c.ids {
		out[k] = v
	}
	return out, nil
}

// reserve counts a sandbox about to be created (max_sandboxes); nothing
// is counted without a bound.
func (p *Provider) reserve(ctx context.Context, id string) error {
	if p.o.MaxSandboxes <= 0 {
		return nil
	}
	return p.counter.Reserve(ctx, id, p.owner(), p.o.MaxSandboxes)
}

// countID is the id a sandbox was counted under: its pool slot for a
// pool sandbox (claimed or not), else its sandbox id.
func countID(info SandboxInfo) string {
	if info.PoolSlot != "" {
		return info.PoolSlot
	}
	return info.SandboxID
}

// unreserve stops counting a destroyed sandbox (a failure is logged: a
// sweep gives back what dead owners' failures left counted).
func (p *Provider) unreserve(ctx context.Context, id string) { p.giveBack(ctx, id, "") }

// giveBack stops counting id (owner set: only while counted for owner).
func (p *Provider) giveBack(ctx context.Context, id, owner string) {
	if p.o.MaxSandboxes <= 0 {
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := p.counter.Unreserve(uctx, id, owner); err != nil {
		p.o.Logger.Warn("aio: max_sandboxes: could not give back a count", "sandbox", id, "err", err)
	}
}

// unreserveFailed gives back the count of a create that failed, unless
// the backend runs a sandbox under that id after all, or the count is no
// longer this process's: a newer holder of the thread's lock reserved the
// same id for its own create, which may not have landed yet.
func (p *Provider) unreserveFailed(ctx context.Context, id string) {
	if p.o.MaxSandboxes <= 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, ok, err := p.o.Backend.Discover(dctx, id); err != nil || ok {
		return
	}
	owner, _ := Held(ctx)
	if owner == "" {
		owner = p.owner()
	}
	p.giveBack(ctx, id, owner)
}
