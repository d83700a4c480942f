package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/unfenced"
)

// ErrLeaseLost is the cause (wrapping ErrLockLost) when this process's
// owner lease lapsed: the store may already count the process as dead and
// let others collect what it owns, so it stops using its sandboxes at
// once and starts again under a new owner id.
var ErrLeaseLost error = &kindError{msg: "aio: this process's owner lease lapsed", kind: ErrLockLost}

// kindError is a sentinel that also matches a broader one.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// errReleased ends a lease its holder gave back.
var errReleased = errors.New("aio: lease released")

// Lease is one lease a state store granted: a thread's lock, with its
// fencing token, or a process's owner lease, with its owner id. The
// holder measures it on its own monotonic clock from the moment each
// grant or renewal was sent, never from the answer's arrival: the store
// started its TTL later than that, so the holder never believes it holds
// the lease after the store let it go (clocks running at the same rate
// are the only assumption). Err checks the deadline when called, not
// only when a timer fires, so a holder that resumes after a stall (a GC
// pause, a frozen container) learns it before its next call.
type Lease struct {
	id      string
	token   int64
	ttl     time.Duration
	release func()
	crashed func() // what the holder's death does (test hook; nil: nothing)

	ctx  context.Context // cancelled, with the cause, when the lease ends
	stop context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time // with its monotonic reading; zero: no expiry
	timer    *time.Timer
	once     sync.Once
}

// NewLease is for state stores: a lease whose grant was sent at sent and
// that the store keeps for ttl after each grant or renewal (0: until its
// holder loses or releases it, as a flock). token is the fencing token of
// a lock (0 for owner leases), id the owner id of an owner lease.
// release, if not nil, is what Release calls once (stop renewing, give
// the lease back).
func NewLease(id string, token int64, sent time.Time, ttl time.Duration, release func()) *Lease {
	l := &Lease{id: id, token: token, ttl: ttl, release: release}
	l.ctx, l.stop = context.WithCancelCause(context.Background())
	if ttl > 0 && !unfenced.Off.Load() {
		l.deadline = sent.Add(ttl)
		l.timer = time.AfterFunc(time.Until(l.deadline), func() { l.Lose(ErrLockLost) })
	}
	return l
}

// ID is the owner id of an owner lease ("" for a lock).
func (l *Lease) ID() string { return l.id }

// Token is the fencing token of a lock: it grows with every grant of
// the same thread's lock (0 for owner leases).
func (l *Lease) Token() int64 { return l.token }

// TTL is how long the store keeps the lease after a grant or renewal.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Renewed moves the deadline to sent+TTL, sent being when the renewal
// that succeeded was sent. It reports false when the lease has already
// ended: a renewal that succeeds late does not bring it back.
func (l *Lease) Renewed(sent time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return false
	}
	if l.timer == nil {
		return true
	}
	if d := sent.Add(l.ttl); d.After(l.deadline) {
		l.deadline = d
		l.timer.Reset(time.Until(d))
	}
	return true
}

// Lose ends the lease with cause (first call wins).
func (l *Lease) Lose(cause error) {
	l.mu.Lock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.stop(cause)
}

// Err is nil while the lease is held, else why it ended (ErrLockLost or
// ErrLeaseLost, or an error saying it was released).
func (l *Lease) Err() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	expired := !l.deadline.IsZero() && !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if expired {
		l.Lose(ErrLockLost)
	}
	if l.ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(l.ctx)
	if l.id != "" && errors.Is(cause, ErrLockLost) {
		return fmt.Errorf("owner %s: %w", l.id, ErrLeaseLost)
	}
	return cause
}

// Done is closed when the lease ends. A stall past the deadline closes it
// only when the timer runs; Err knows at once.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Context is cancelled, with the lease's end as its cause, when the
// lease ends.
func (l *Lease) Context() context.Context { return l.ctx }

// Deadline is when the lease ends unless renewed (zero: no expiry).
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Release ends the lease and gives it back to the store. It is
// idempotent.
func (l *Lease) Release() {
	l.Lose(errReleased)
	l.once.Do(func() {
		if l.release != nil {
			l.release()
		}
	})
}

// crash ends the lease as its holder's death would: for a flock lease,
// the file stays and only the lock goes (test hook).
func (l *Lease) crash() {
	l.Lose(errReleased)
	l.once.Do(func() {
		if l.crashed != nil {
			l.crashed()
		}
	})
}

// released reports whether the lease ended by Release.
func (l *Lease) released() bool { return errors.Is(context.Cause(l.ctx), errReleased) }

// leaseChain is what a context carries: the leases its work is done
// under (a thread's lock, the owner lease) and a fencing token received
// from elsewhere.
type leaseChain struct {
	lease  *Lease
	token  int64
	parent *leaseChain
}

type leaseKey struct{}

// WithLease returns ctx carrying l: Fence(ctx) then fails once l has
// ended, and reports l's token when it is a lock's. The state stores'
// FencedLocker implementations add their lock's lease to the context
// they return; the provider adds its owner lease to what creates,
// adopts or claims sandboxes.
func WithLease(ctx context.Context, l *Lease) context.Context {
	parent, _ := ctx.Value(leaseKey{}).(*leaseChain)
	return context.WithValue(ctx, leaseKey{}, &leaseChain{lease: l, parent: parent})
}

// ownerLeaseOf is the owner lease ctx carries (nil: none).
func ownerLeaseOf(ctx context.Context) *Lease {
	for c, _ := ctx.Value(leaseKey{}).(*leaseChain); c != nil; c = c.parent {
		if c.lease != nil && c.lease.id != "" {
			return c.lease
		}
	}
	return nil
}

// Held reports the owner lease's id and the lock's fencing token ctx
// carries, whether or not they still hold, and with fencing on or off:
// for logs and a fault test's history, not for decisions (Fence is).
func Held(ctx context.Context) (owner string, token int64) {
	for c, _ := ctx.Value(leaseKey{}).(*leaseChain); c != nil; c = c.parent {
		switch {
		case c.lease != nil && c.lease.id != "" && owner == "":
			owner = c.lease.id
		case c.lease != nil && c.lease.token != 0 && token == 0:
			token = c.lease.token
		case c.lease == nil && token == 0:
			token = c.token
		}
	}
	return owner, token
}

// WithFence returns ctx carrying a fencing token received from elsewhere:
// a provisioner server passes on the token its client sent.
func WithFence(ctx context.Context, token int64) context.Context {
	parent, _ := ctx.Value(leaseKey{}).(*leaseChain)
	return context.WithValue(ctx, leaseKey{}, &leaseChain{token: token, parent: parent})
}

// Fence is what a backend asks right before each call that creates,
// destroys, adopts or claims a sandbox: the fencing token of the thread
// lock ctx is held under (0: none), and an error wrapping ErrLockLost
// when that lock or this process's owner lease has ended by the
// holder's clock. A backend that can label what it creates stores the
// token there, and refuses to destroy or adopt a sandbox that carries a
// larger token (a newer holder's): a former holder's late call is
// refused by the resource itself.
func Fence(ctx context.Context) (int64, error) {
	if unfenced.Off.Load() {
		return 0, nil
	}
	var token int64
	for c, _ := ctx.Value(leaseKey{}).(*leaseChain); c != nil; c = c.parent {
		if err := c.lease.Err(); err != nil {
			return 0, err
		}
		if token == 0 && c.lease != nil {
			token = c.lease.token
		}
		if token == 0 {
			token = c.token
		}
	}
	return token, nil
}

// ErrStaleFence is returned (wrapped, matching ErrLockLost) by a backend
// asked to destroy or adopt a sandbox that a newer holder of the
// thread's lock created or took over.
var ErrStaleFence = fmt.Errorf("aio: a newer holder of the thread's lock owns this sandbox: %w", ErrLockLost)

// CheckFence compares the token a call is made under (mine) with the one
// the sandbox carries (theirs, 0: none): it fails with ErrStaleFence when
// theirs is newer. Backends call it before a destroy or an adoption.
func CheckFence(mine, theirs int64, what string) error {
	if unfenced.Off.Load() || mine == 0 || theirs <= mine {
		return nil
	}
	return fmt.Errorf("%s carries fencing token %d, this call only %d: %w", what, theirs, mine, ErrStaleFence)
}
