package orchestrator

import (
	"context"
	"time"
)

var timeNow = time.Now

// Test hooks.

func ThreadLocks(p *Provider) int { return p.threadLocks() }

type Entry = entry

func IdleEntries(p *Provider) []*Entry { return p.idleEntries(timeNow()) }

func ReapEntries(p *Provider, es []*Entry) {
	for _, e := range es {
		_ = p.reapEntry(context.Background(), e)
	}
}

// Crash stops p's goroutines and drops its owner lease the way kill -9
// would: nothing is released or destroyed, and its FileStore lease file
// is left for a sweep to find (as a dead process leaves it).
func Crash(p *Provider) {
	p.closed.Store(true)
	close(p.stopReap)
	close(p.stopSweep)
	if p.pool != nil {
		p.pool.mu.Lock()
		p.pool.closed = true
		p.pool.mu.Unlock()
		close(p.pool.stop)
		<-p.pool.done
	}
	<-p.reapDone
	<-p.sweepDone
	if l := p.ownerLease(); l != nil {
		l.crash()
	}
	p.shutOnce.Do(func() {}) // a later Shutdown does nothing
}

// For the external tests: the unexported names they check.
var (
	ResolveEnv       = resolveEnv
	ErrSandboxExited = errSandboxExited
)
