package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// SweepReport says what one Sweep collected.
type SweepReport struct {
	// DeadOwners are the owners whose lease had ended (for at least the
	// store's LeaseTTL) and who still had something.
	DeadOwners []string
	// Sandboxes are the sandbox ids destroyed.
	Sandboxes []string
	// States are the threads whose saved state was removed.
	States []string
	// Slots are the pool slot directories removed.
	Slots []string
	// Counts are the max_sandboxes reservations given back.
	Counts []string
}

// slotGrace is how old a pool slot directory without an owner file (a
// process died between making it and naming itself, or an older version
// made it) must be before a sweep removes it.
const slotGrace = time.Minute

// sweepLoop sweeps every SweepInterval until Shutdown.
func (p *Provider) sweepLoop() { every(p.o.SweepInterval, p.stopSweep, p.sweepDone, p.sweepPass) }

func (p *Provider) sweepPass(ctx context.Context) {
	r, err := p.Sweep(ctx)
	if err != nil && ctx.Err() == nil {
		p.o.Logger.Warn("aio: sweep", "err", err)
	}
	if len(r.Sandboxes)+len(r.States)+len(r.Slots)+len(r.Counts) > 0 {
		p.o.Logger.Info("aio: swept what dead owners left", "owners", r.DeadOwners, "sandboxes", r.Sandboxes,
			"states", r.States, "slots", r.Slots, "counts", r.Counts)
	}
}

// Sweep collects, once, what owners whose lease ended left behind: their
// sandboxes (thread, anonymous and pool ones; a thread's under its
// locks, its files moved back from a pool slot; with a StoppedLister
// backend, those that never started or exited too), the saved state of
// their threads, their pool slot directories, and their max_sandboxes
// counts. A lease the store reports absent is believed ended only once
// this provider has seen it absent for the store's LeaseTTL (an earlier
// Sweep, or SweepWait), so its holder, which stops when its own clock
// says the lease ran out, has stopped. Thread sandboxes kept by a
// shut-down owner (shutdown_policy keep) are not collected. It needs a
// store that keeps owner leases; with another it does nothing.
func (p *Provider) Sweep(ctx context.Context) (SweepReport, error) {
	r, _, err := p.sweep(ctx)
	return r, err
}

// SweepWait is Sweep that first waits, when it finds leases absent it
// has not seen absent before, until they have been absent for the
// store's LeaseTTL (`sage sandbox rm --all`).
func (p *Provider) SweepWait(ctx context.Context) (SweepReport, error) {
	r, wait, err := p.sweep(ctx)
	if err != nil || wait <= 0 {
		return r, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-t.C:
	}
	r2, _, err := p.sweep(ctx)
	r2.DeadOwners = append(r.DeadOwners, r2.DeadOwners...)
	r2.Sandboxes = append(r.Sandboxes, r2.Sandboxes...)
	r2.States = append(r.States, r2.States...)
	r2.Slots = append(r.Slots, r2.Slots...)
	r2.Counts = append(r.Counts, r2.Counts...)
	return r2, err
}

// listAll lists the backend's sandboxes, running (the unclaimed pool's
// included) and stopped: in one read with a Snapshotter, else stopped
// first, then the pool, then the running ones, so that one moving
// forward between two calls (created to running, pooled to claimed) is
// in the later one.
func (p *Provider) listAll(ctx context.Context) (running, stopped []SandboxInfo, err error) {
	if sn, ok := p.o.Backend.(Snapshotter); ok {
		if running, stopped, err = sn.ListAll(ctx); err != nil {
			return nil, nil, fmt.Errorf("aio: sweep: %w", err)
		}
		return running, stopped, nil
	}
	if sl, ok := p.o.Backend.(StoppedLister); ok {
		if stopped, err = sl.ListStopped(ctx); err != nil {
			return nil, nil, fmt.Errorf("aio: sweep: %w", err)
		}
	}
	if pl, ok := p.o.Backend.(Pooler); ok {
		pooled, err := pl.ListPool(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("aio: sweep: %w", err)
		}
		running = pooled
	}
	live, err := p.o.Backend.ListRunning(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("aio: sweep: %w", err)
	}
	running = append(running, live...)
	// One listed twice (stopped, then running; pooled, then claimed) is
	// taken as the later call saw it.
	later := map[string]bool{}
	for i := len(running) - 1; i >= 0; i-- {
		k := listKey(running[i])
		if later[k] {
			running = slices.Delete(running, i, i+1)
			continue
		}
		later[k] = true
	}
	stopped = slices.DeleteFunc(stopped, func(info SandboxInfo) bool { return later[listKey(info)] })
	return running, stopped, nil
}

// listKey identifies one sandbox across listings: its container, or its
// count id where the backend names no container.
func listKey(info SandboxInfo) string {
	if info.ContainerID != "" {
		return "c:" + info.ContainerID
	}
	return "s:" + countID(info)
}

// slotInfo is what a pool slot directory says of itself.
type slotInfo struct {
	owner, thread string
	old           bool // no owner file, and older than slotGrace
}

// sweep is one pass; wait > 0 says how long until leases first seen
// absent now count as ended.
func (p *Provider) sweep(ctx context.Context) (r SweepReport, wait time.Duration, err error) {
	lr, ok := p.o.Store.(Leaser)
	if !ok {
		return r, 0, nil
	}
	running, stopped, err := p.listAll(ctx)
	if err != nil {
		return r, 0, err
	}
	records := map[string]SandboxInfo{}
	if l, ok := p.o.Store.(Lister); ok {
		if records, err = l.List(ctx); err != nil {
			return r, 0, fmt.Errorf("aio: sweep: %w", err)
		}
	}
	counted := map[string]string{}
	if c, ok := p.o.Store.(Counter); ok {
		if counted, err = c.Reserved(ctx); err != nil {
			return r, 0, fmt.Errorf("aio: sweep: %w", err)
		}
	}
	slots := p.slotDirs()

	referenced := map[string]bool{} // sandbox ids a saved state names
	owners := map[string]bool{}
	for _, st := range records {
		referenced[st.SandboxID] = true
		owners[st.Owner] = true
	}
	for _, info := range running {
		if !referenced[info.SandboxID] {
			owners[info.Owner] = true
		}
	}
	for _, info := range stopped {
		owners[info.Owner] = true
	}
	for _, o := range counted {
		owners[o] = true
	}
	for _, s := range slots {
		owners[s.owner] = true
	}
	me := p.owner()
	delete(owners, "")
	delete(owners, me)
	dead, wait, err := p.deadOwners(ctx, lr, owners)
	if err != nil {
		return r, 0, err
	}
	for o := range dead {
		r.DeadOwners = append(r.DeadOwners, o)
	}
	slices.Sort(r.DeadOwners)
	if len(dead) == 0 {
		return r, wait, nil
	}
	// List again: what a dead owner's late call (its process was paused
	// between its last Fence and the engine's act) created or started
	// before the decision is in this listing; what lands after it never
	// starts, as its Fence fails from then on. A count is given back only
	// for a sandbox absent here.
	if running, stopped, err = p.listAll(ctx); err != nil {
		return r, 0, err
	}

	var errs []error
	threads := map[string]bool{}
	for t, st := range records {
		if dead[st.Owner] {
			threads[t] = true
		}
	}
	gone := map[string]bool{} // count ids of what this pass destroyed
	for _, info := range running {
		if referenced[info.SandboxID] || !dead[info.Owner] {
			continue
		}
		t := info.ThreadID
		if t == "" && info.PoolSlot != "" {
			t = slots[info.PoolSlot].thread
		}
		if t != "" {
			threads[t] = true
			continue
		}
		if err := p.destroy(ctx, info); err != nil {
			errs = append(errs, err)
			continue
		}
		gone[countID(info)] = true
		r.Sandboxes = append(r.Sandboxes, info.SandboxID)
	}
	for _, info := range stopped { // never started (its creator died first) or exited: nobody serves from it
		if !dead[info.Owner] {
			continue
		}
		destroy := func(held context.Context) error { return p.destroy(held, info) }
		t := info.ThreadID
		if t == "" && info.PoolSlot != "" {
			t = slots[info.PoolSlot].thread
		}
		var err error
		if t != "" && driver.ValidID(t) { // its files may be in its slot: under the thread's locks
			err = p.underThreadLocks(ctx, t, destroy)
		} else {
			err = destroy(ctx)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		gone[countID(info)] = true
		r.Sandboxes = append(r.Sandboxes, info.SandboxID)
	}
	for _, t := range slices.Sorted(maps.Keys(threads)) {
		destroyed, removed, err := p.sweepThread(ctx, t, dead)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if destroyed != nil {
			gone[countID(*destroyed)] = true
			r.Sandboxes = append(r.Sandboxes, destroyed.SandboxID)
		}
		if removed {
			r.States = append(r.States, t)
		}
	}

	present := map[string]bool{}
	for _, info := range append(running, stopped...) {
		if !gone[countID(info)] {
			present[countID(info)] = true
		}
	}
	if c, ok := p.o.Store.(Counter); ok {
		for id, o := range counted {
			if dead[o] && !present[id] {
				if err := c.Unreserve(ctx, id, o); err != nil {
					errs = append(errs, err)
					continue
				}
				r.Counts = append(r.Counts, id)
			}
		}
	}
	for slot, s := range slots {
		if present[slot] || !(dead[s.owner] || s.owner == "" && s.old) {
			continue
		}
		if err := p.sweepSlot(ctx, slot, s.thread); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Slots = append(r.Slots, slot)
	}
	return r, wait, errors.Join(errs...)
}

// deadOwners asks the store which owners' leases are held, and returns
// those seen absent for at least the lease TTL; wait is how long until
// the next of the others would count.
func (p *Provider) deadOwners(ctx context.Context, lr Leaser, owners map[string]bool) (map[string]bool, time.Duration, error) {
	dead := map[string]bool{}
	if len(owners) == 0 {
		return dead, 0, nil
	}
	live, err := lr.LiveLeases(ctx, slices.Collect(maps.Keys(owners)))
	if err != nil {
		return nil, 0, fmt.Errorf("aio: sweep: %w", err)
	}
	now, ttl := time.Now(), lr.LeaseTTL()
	var wait time.Duration
	p.sweepMu.Lock()
	defer p.sweepMu.Unlock()
	for o := range owners {
		if held, known := live[o]; held || !known { // alive, or another store's owner
			delete(p.absent, o)
			continue
		}
		first, seen := p.absent[o]
		if !seen {
			first = now
			p.absent[o] = now
		}
		if left := ttl - now.Sub(first); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		dead[o] = true
	}
	for o := range p.absent { // forget owners that left nothing behind
		if !owners[o] {
			delete(p.absent, o)
		}
	}
	return dead, wait, nil
}

// sweepThread collects a dead owner's sandbox and saved state of thread
// t under the thread's locks, checking again there that no live process
// took it over meanwhile. It returns what it destroyed and whether it
// removed the state.
func (p *Provider) sweepThread(ctx context.Context, t string, dead map[string]bool) (destroyed *SandboxInfo, removed bool, err error) {
	if !driver.ValidID(t) {
		return nil, false, nil
	}
	err = p.underThreadLocks(ctx, t, func(hctx context.Context) error {
		destroyed, removed, err = p.sweepHeld(hctx, t, dead)
		return err
	})
	return destroyed, removed, err
}

// underThreadLocks runs f under thread t's locks (this process's and the
// state store's); f gets the held context.
func (p *Provider) underThreadLocks(ctx context.Context, t string, f func(held context.Context) error) error {
	unlock, err := p.lockThread(ctx, t)
	if err != nil {
		return fmt.Errorf("aio: sweep %s: %w", t, err)
	}
	defer unlock()
	held, release, err := p.lockStore(ctx, t)
	if err != nil {
		return fmt.Errorf("aio: sweep %s: %w", t, err)
	}
	defer release()
	return f(held)
}

func (p *Provider) sweepHeld(hctx context.Context, t string, dead map[string]bool) (*SandboxInfo, bool, error) {
	st, saved, err := p.o.Store.Load(hctx, t)
	if err != nil {
		return nil, false, fmt.Errorf("aio: sweep %s: %w", t, err)
	}
	if saved && !dead[st.Owner] {
		return nil, false, nil // taken over, or kept (no owner)
	}
	found, ok, err := p.o.Backend.Discover(hctx, SandboxIDFor(t))
	if err != nil {
		return nil, false, fmt.Errorf("aio: sweep %s: %w", t, err)
	}
	if ok && !saved && !dead[found.Owner] {
		return nil, false, nil // a live process made it after the listing
	}
	if err := stillHeld(hctx, t); err != nil {
		return nil, false, err
	}
	var destroyed *SandboxInfo
	if ok {
		found.ThreadID = t
		if err := p.destroy(hctx, found); err != nil {
			return nil, false, fmt.Errorf("aio: sweep %s: %w", t, err)
		}
		destroyed = &found
	}
	if !saved {
		return destroyed, false, nil
	}
	if err := p.o.Store.Remove(hctx, t); err != nil {
		return destroyed, false, fmt.Errorf("aio: sweep %s: %w", t, err)
	}
	return destroyed, true, nil
}

// sweepSlot removes a dead owner's pool slot directory whose sandbox is
// gone; one holding a thread's files (its claim's sandbox died with its
// process) moves them back first, under the thread's lock.
func (p *Provider) sweepSlot(ctx context.Context, slot, thread string) error {
	if thread == "" || !driver.ValidID(thread) {
		return p.removeSlot(slot)
	}
	return p.underThreadLocks(ctx, thread, func(context.Context) error { return p.detachSlot(thread, slot) })
}

// slotDirs reads Home/pool: slot -> its owner and the thread whose files
// it holds.
func (p *Provider) slotDirs() map[string]slotInfo {
	out := map[string]slotInfo{}
	ents, err := os.ReadDir(filepath.Join(p.o.Home, "pool"))
	if err != nil {
		return out
	}
	for _, e := range ents {
		if !e.IsDir() || !driver.ValidID(e.Name()) {
			continue
		}
		s := slotInfo{owner: readSmall(p.slotOwnerFile(e.Name())), thread: readSmall(p.slotMarker(e.Name()))}
		if fi, err := e.Info(); err == nil && s.owner == "" {
			s.old = time.Since(fi.ModTime()) > slotGrace
		}
		out[e.Name()] = s
	}
	return out
}

// readSmall reads an id file (at most 64 bytes; "" otherwise).
func readSmall(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 64 || !driver.ValidID(string(b)) {
		return ""
	}
	return string(b)
}
