package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

// faultyProxy forwards TCP to Redis; it can hold back every reply by a
// delay, and cut the link both ways (a partition: bytes are dropped).
type faultyProxy struct {
	ln      net.Listener
	target  string
	delay   atomic.Int64 // nanoseconds each reply chunk is held back
	cut     atomic.Bool
	replies atomic.Int64 // reply chunks delivered
}

func newFaultyProxy(t *testing.T, target string) *faultyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultyProxy{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Go(func() { p.pipe(s, c, false); s.Close(); c.Close() })
			wg.Go(func() { p.pipe(c, s, true); s.Close(); c.Close() })
		}
	})
	return p
}

func (p *faultyProxy) pipe(dst, src net.Conn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.delay.Load(); reply && d > 0 {
				time.Sleep(time.Duration(d))
			}
			if !p.cut.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				if reply {
					p.replies.Add(1)
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (p *faultyProxy) url() string { return "redis://" + p.ln.Addr().String() + "/0" }

// twoStores opens one store through a faulty proxy and one directly, on
// the same key prefix.
func twoStores(t *testing.T, o redisstore.Options) (viaProxy, direct *redisstore.Store, p *faultyProxy) {
	open(t, redisstore.Options{}) // fails clearly without redis
	o.Prefix = "sage:test:lease:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	p = newFaultyProxy(t, "127.0.0.1:6379")
	var err error
	viaProxy, err = redisstore.Open(p.url(), o)
	require.NoError(t, err)
	direct, err = redisstore.Open("redis://127.0.0.1:6379/0", o)
	require.NoError(t, err)
	t.Cleanup(func() { viaProxy.Close(); direct.Close() })
	return viaProxy, direct, p
}

// Issue 35, item 4: a renewal whose answer arrives 0.9 s late, then a
// partition (TTL 3 s). The old holder measured the lock from the answer's
// arrival and looked only at its ticks, so it still believed it held the
// lock for up to two seconds after another process took it. Measured
// from the renewal's sending, the holder's lock has ended by the time
// Redis lets the other take it: at that moment Fence refuses the former
// holder.
func TestLockIsMeasuredFromTheSending(t *testing.T) {
	a, b, proxy := twoStores(t, redisstore.Options{LockTTL: 3 * time.Second})
	ctx := context.Background()
	held, unlockA, err := a.LockFenced(ctx, "t")
	require.NoError(t, err)
	defer unlockA()
	tokenA, err := orchestrator.Fence(held)
	require.NoError(t, err)
	require.Positive(t, tokenA)

	time.Sleep(500 * time.Millisecond)
	before := proxy.replies.Load()
	proxy.delay.Store(int64(900 * time.Millisecond)) // the next renewal's answer comes late
	require.Eventually(t, func() bool { return proxy.replies.Load() > before }, 5*time.Second, 5*time.Millisecond)
	proxy.cut.Store(true) // then the partition
	_, err = orchestrator.Fence(held)
	require.NoError(t, err, "control: the holder holds the lock before the partition takes effect")

	heldB, unlockB, err := b.LockFenced(ctx, "t") // waits for Redis to expire A's lock
	require.NoError(t, err)
	defer unlockB()
	_, err = orchestrator.Fence(held)
	require.ErrorIs(t, err, orchestrator.ErrLockLost, "the former holder still believed it held the lock when another took it")
	tokenB, err := orchestrator.Fence(heldB)
	require.NoError(t, err)
	assert.Greater(t, tokenB, tokenA, "fencing tokens grow with every grant")
	require.Eventually(t, func() bool { return held.Err() != nil }, 5*time.Second, 10*time.Millisecond)
	assert.ErrorIs(t, context.Cause(held), orchestrator.ErrLockLost)
}

// Fencing tokens grow with every grant of a thread's lock.
func TestFenceTokensGrow(t *testing.T) {
	s := open(t, redisstore.Options{})
	ctx := context.Background()
	var last int64
	for range 3 {
		held, unlock, err := s.LockFenced(ctx, "t")
		require.NoError(t, err)
		tok, err := orchestrator.Fence(held)
		unlock()
		require.NoError(t, err)
		assert.Greater(t, tok, last)
		last = tok
	}
}

// Owner leases: one holder per id, renewed past the TTL while held,
// absent once released; one cut off from Redis ends within its TTL of
// its last renewal's sending, and says so as ErrLeaseLost.
func TestOwnerLease(t *testing.T) {
	a, b, proxy := twoStores(t, redisstore.Options{LeaseTTL: 600 * time.Millisecond})
	ctx := context.Background()
	l, err := a.GrantLease(ctx, "o1")
	require.NoError(t, err)
	_, err = b.GrantLease(ctx, "o1")
	require.Error(t, err, "two holders of one owner id")
	time.Sleep(1500 * time.Millisecond)
	live, err := b.LiveLeases(ctx, []string{"o1", "o2"})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"o1": true, "o2": false}, live, "renewed past its TTL")
	require.NoError(t, l.Err())

	proxy.cut.Store(true)
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a lease cut off from Redis did not end")
	}
	assert.ErrorIs(t, l.Err(), orchestrator.ErrLeaseLost)
	require.Eventually(t, func() bool {
		live, err := b.LiveLeases(ctx, []string{"o1"})
		return err == nil && !live["o1"]
	}, 5*time.Second, 20*time.Millisecond, "Redis kept the lease of a holder that stopped renewing")

	l2, err := b.GrantLease(ctx, "o2")
	require.NoError(t, err)
	l2.Release()
	live, err = b.LiveLeases(ctx, []string{"o2"})
	require.NoError(t, err)
	assert.False(t, live["o2"], "a released lease is gone at once")
}

// Issue 35, item 1: the count is one script, so concurrent reservations
// from two stores (two hosts) never pass the bound; an id counted again
// is not counted twice; one given back makes room.
func TestReserveIsABound(t *testing.T) {
	a, b, _ := twoStores(t, redisstore.Options{})
	ctx := context.Background()
	var ok, full atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			s := a
			if i%2 == 1 {
				s = b
			}
			err := s.Reserve(ctx, fmt.Sprintf("sb-%d", i), "o", 3)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, orchestrator.ErrTooManySandboxes):
				full.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(3), ok.Load())
	assert.Equal(t, int32(17), full.Load())
	got, err := a.Reserved(ctx)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for id := range got {
		require.NoError(t, b.Reserve(ctx, id, "o2", 3), "an id counted already is not counted twice")
		require.NoError(t, a.Unreserve(ctx, id, "o"), "a former reserver's failed create gives back nothing now")
		require.ErrorIs(t, a.Reserve(ctx, "one-more", "o", 3), orchestrator.ErrTooManySandboxes, "the newer reserver's count was given back")
		require.NoError(t, a.Unreserve(ctx, id, "o2"))
		break
	}
	require.NoError(t, a.Reserve(ctx, "new", "o", 3), "control: a place given back is free")
	require.ErrorIs(t, a.Reserve(ctx, "one-more", "o", 3), orchestrator.ErrTooManySandboxes)
	for id := range got {
		_ = a.Unreserve(ctx, id, "")
	}
	_ = a.Unreserve(ctx, "new", "")
}
