package orchestrator

import (
	"context"
	"errors"
	"fmt"
)

// ErrLockLost is the cause of a held-lock context's cancellation when the
// state store could not keep the lock (no renewal succeeded within its
// TTL of being sent, or another holder took it): the holder must stop
// before it creates, destroys or saves anything.
var ErrLockLost = errors.New("aio: the thread's state lock was lost")

// FencedLocker is implemented by state stores whose lock can be lost
// while held (the redis store). LockFenced returns, with unlock, a
// context derived from ctx that is cancelled with cause ErrLockLost when
// the lock is lost; the store's Save and Remove under that context check
// the lock's token on the server, so a late write of a former holder is
// refused.
type FencedLocker interface {
	LockFenced(ctx context.Context, threadID string) (held context.Context, unlock func(), err error)
}

// lockStore takes the thread's state-store lock; the returned context
// fences every write made under it (see FencedLocker). A store without
// FencedLocker cannot lose its lock: ctx is returned as is.
func (p *Provider) lockStore(ctx context.Context, threadID string) (context.Context, func(), error) {
	if f, ok := p.o.Store.(FencedLocker); ok {
		return f.LockFenced(ctx, threadID)
	}
	unlock, err := p.o.Store.Lock(ctx, threadID)
	return ctx, unlock, err
}

// stillHeld is checked before creating, destroying or saving under the
// lock (a destroy itself runs on a context that ignores cancellation).
// The leases held carries are asked for their deadlines now (Fence), so
// a holder that resumes after a stall stops even before their timers
// have run.
func stillHeld(held context.Context, threadID string) error {
	if _, err := Fence(held); err != nil {
		return fmt.Errorf("thread %s: %w", threadID, err)
	}
	if held.Err() == nil {
		return nil
	}
	cause := context.Cause(held)
	if errors.Is(cause, ErrLockLost) {
		return fmt.Errorf("thread %s: %w", threadID, cause)
	}
	return cause
}
