package observability

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A run is one started event (chain, agent, model call, tool...) in the
// tree of its context: its handlers, parent and children.

type runCtxKey struct{}

var runIDs atomic.Uint64

// run is both the run's identity and the context that carries it: one
// allocation per started run.
type run struct {
	context.Context // what the caller passed to start
	Run

	m        *Manager
	handlers []Handler       // the handlers that saw the start
	hctx     context.Context // the context after every handler's start
	parent   *run
	ended    atomic.Bool

	mu       sync.Mutex // guards children and the children's prev/next/linked
	children *run

	prev, next *run // siblings, guarded by parent.mu
	linked     bool
}

func (r *run) Value(key any) any {
	if key == (runCtxKey{}) {
		return r
	}
	return r.Context.Value(key)
}

func (r *run) String() string { return fmt.Sprintf("%v.WithRun(%s %d)", r.Context, r.Kind, r.ID) }

// RunFromContext returns the innermost run carried by ctx.
func RunFromContext(ctx context.Context) (Run, bool) {
	if ctx == nil {
		return Run{}, false
	}
	r, _ := ctx.Value(runCtxKey{}).(*run)
	if r == nil {
		return Run{}, false
	}
	return r.Run, true
}

func (m *Manager) newRun(ctx context.Context, hs []Handler, kind Kind, name, session string) *run {
	r := &run{Context: ctx, m: m, handlers: hs}
	r.ID = runIDs.Add(1)
	r.Kind = kind
	r.Name = name
	r.Start = time.Now()
	if p, _ := ctx.Value(runCtxKey{}).(*run); p != nil {
		r.parent = p
		r.ParentID = p.ID
		r.RootID = p.RootID
		if session == "" {
			session = p.SessionID
		}
		p.mu.Lock()
		r.next = p.children
		if p.children != nil {
			p.children.prev = r
		}
		p.children = r
		r.linked = true
		p.mu.Unlock()
	} else {
		r.RootID = r.ID
	}
	r.SessionID = session
	return r
}

// unlinkLocked removes c from r's open children; r.mu must be held.
func (r *run) unlinkLocked(c *run) {
	if !c.linked {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		r.children = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next, c.linked = nil, nil, false
}

func (r *run) unlink() {
	if p := r.parent; p != nil {
		p.mu.Lock()
		p.unlinkLocked(r)
		p.mu.Unlock()
	}
}

// closeChildren ends every open descendant with ErrParentEnded, deepest first.
func (r *run) closeChildren() {
	for {
		r.mu.Lock()
		c := r.children
		if c != nil {
			r.unlinkLocked(c)
		}
		r.mu.Unlock()
		if c == nil {
			return
		}
		if c.ended.CompareAndSwap(false, true) {
			c.closeChildren()
			c.m.dispatchError(c, ErrParentEnded)
		}
	}
}
