package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

// claimingBackend is the in-memory backend with a warm pool: an
// unclaimed pool sandbox has an id starting "pool-", and Claim moves it
// to the thread's id.
type claimingBackend struct{ *orchestratortest.Backend }

func (b claimingBackend) Claim(ctx context.Context, pooled orchestrator.SandboxInfo, sid, thread string) (orchestrator.SandboxInfo, error) {
	if _, ok, _ := b.Discover(ctx, pooled.SandboxID); !ok {
		return orchestrator.SandboxInfo{}, errors.New("claim: gone")
	}
	b.Vanish(pooled.SandboxID)
	info, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: sid, ThreadID: thread, Owner: pooled.Owner})
	info.PoolSlot = pooled.PoolSlot
	return info, err
}

func (b claimingBackend) ListPool(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	all, err := b.Backend.ListRunning(ctx)
	var out []orchestrator.SandboxInfo
	for _, info := range all {
		if strings.HasPrefix(info.SandboxID, "pool-") {
			info.PoolSlot = info.SandboxID
			out = append(out, info)
		}
	}
	return out, err
}

func (b claimingBackend) ListRunning(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	all, err := b.Backend.ListRunning(ctx)
	var out []orchestrator.SandboxInfo
	for _, info := range all {
		if !strings.HasPrefix(info.SandboxID, "pool-") {
			out = append(out, info)
		}
	}
	return out, err
}

func newProvider(t *testing.T, o orchestrator.ProviderOptions) *orchestrator.Provider {
	t.Helper()
	if o.SweepInterval == 0 {
		o.SweepInterval = -1 // sweeps are the tests' to call
	}
	p, err := orchestrator.NewProvider(o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// Issue 35, item 1: max_sandboxes is a bound across goroutines and
// processes (two providers sharing one home count against one bound):
// four concurrent acquires of four threads with max 1 make one sandbox.
// The control: releasing it lets the next one in.
func TestMaxSandboxesIsABound(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	ps := []*orchestrator.Provider{
		newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home, MaxSandboxes: 1, Owner: "p1"}),
		newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home, MaxSandboxes: 1, Owner: "p2"}),
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var made, refused atomic.Int32
	var winner atomic.Value
	for i := range 4 {
		wg.Go(func() {
			_, err := ps[i%2].Acquire(ctx, fmt.Sprintf("t%d", i))
			switch {
			case err == nil:
				made.Add(1)
				winner.Store(i)
			case errors.Is(err, orchestrator.ErrTooManySandboxes):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), made.Load(), "sandboxes made with max_sandboxes 1")
	assert.Equal(t, int32(3), refused.Load())
	assert.Equal(t, 1, b.Running())

	i := winner.Load().(int)
	require.NoError(t, ps[i%2].ReleaseThread(ctx, fmt.Sprintf("t%d", i)))
	_, err := ps[(i+1)%2].Acquire(ctx, "after")
	require.NoError(t, err, "control: a released place is free again, for the other process too")
	assert.Equal(t, 1, b.Running())
}

// Issue 35, item 1: the warm pool counts. With max_sandboxes 1 and a
// pool of 1, the idle slot is the one sandbox: an anonymous sandbox is
// refused (the old check counted held sandboxes only, and made a second).
func TestMaxSandboxesCountsThePool(t *testing.T) {
	b := claimingBackend{newFakeBackend(t)}
	p := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: t.TempDir(), MaxSandboxes: 1, PoolSize: 1})
	require.NoError(t, p.WaitPool(context.Background(), 1))
	_, err := p.Acquire(context.Background(), "")
	require.ErrorIs(t, err, orchestrator.ErrTooManySandboxes)
	assert.Equal(t, 1, b.Running())
	// Control: a thread claims the slot, within the bound.
	_, err = p.Acquire(context.Background(), "t1")
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond) // the filler may try to refill
	assert.Equal(t, 1, b.Running(), "the pool refilled past max_sandboxes")
}

// blockingStore is a FileStore whose next Lock (once armed) blocks until
// its context ends, as a contended or slow store's would.
type blockingStore struct {
	*orchestrator.FileStore
	armed   atomic.Bool
	entered chan struct{}
}

func (s *blockingStore) Lock(ctx context.Context, threadID string) (func(), error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.FileStore.Lock(ctx, threadID)
}

// Issue 35, item 2: Shutdown during a reaper pass, whose release it
// interrupts, still releases the sandbox: the old reaper forgot the entry
// first, so Shutdown saw nothing, returned nil, and the sandbox ran on.
func TestShutdownDuringReapReleases(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	st := &blockingStore{FileStore: orchestrator.NewFileStore(home), entered: make(chan struct{})}
	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Store: st,
		IdleTimeout: 50 * time.Millisecond, ReapInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	_, err = p.Acquire(context.Background(), "t1")
	require.NoError(t, err)
	st.armed.Store(true)
	select {
	case <-st.entered: // the reaper is releasing it
	case <-time.After(10 * time.Second):
		t.Fatal("the reaper never released the idle sandbox")
	}
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Zero(t, b.Running(), "the sandbox outlived Shutdown")
	_, saved, err := st.Load(context.Background(), "t1")
	require.NoError(t, err)
	assert.False(t, saved, "its state outlived Shutdown")
}

// Issue 35, item 7: a legacy record (the original's 8-hex sandbox id)
// whose container still runs is retired when the thread is acquired: the
// old container is destroyed and the thread gets its 16-hex sandbox.
func TestLegacyIDIsRetired(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	ctx := context.Background()
	old, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: "deadbeef", ThreadID: "legacy", Port: 8080})
	require.NoError(t, err)
	require.NoError(t, orchestrator.NewFileStore(home).Save(ctx, "legacy", old))
	p := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home})
	sid, err := p.Acquire(ctx, "legacy")
	require.NoError(t, err)
	assert.Equal(t, orchestrator.SandboxIDFor("legacy"), sid)
	_, running, _ := b.Discover(ctx, "deadbeef")
	assert.False(t, running, "the legacy sandbox runs on beside the new one")
	assert.Equal(t, 1, b.Running())
	st, _, err := orchestrator.NewFileStore(home).Load(ctx, "legacy")
	require.NoError(t, err)
	assert.Equal(t, sid, st.SandboxID, "the record names the new sandbox")
}

// hookStore is a FileStore that runs afterUnlock (once) right after the
// provider gives a thread's lock back.
type hookStore struct {
	*orchestrator.FileStore
	afterUnlock func()
	once        sync.Once
}

func (s *hookStore) Lock(ctx context.Context, threadID string) (func(), error) {
	unlock, err := s.FileStore.Lock(ctx, threadID)
	if err != nil {
		return nil, err
	}
	return func() {
		unlock()
		if s.afterUnlock != nil {
			s.once.Do(s.afterUnlock)
		}
	}, nil
}

// Issue 35, item 6: PurgeThread removed the thread's directory, its lock
// file included, after giving the lock back: a locker that took the lock
// in between held it on a deleted file, and the next locker made a new
// file and held "the" lock too. Now the directory is removed under the
// lock, and a lock taken on a removed file is taken again. The check: a
// second locker cannot lock while the first holds it.
func TestPurgeLeavesOneLock(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	other := orchestrator.NewFileStore(home)
	var held func()
	st := &hookStore{FileStore: orchestrator.NewFileStore(home)}
	p := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home, Store: st})
	ctx := context.Background()
	_, err := p.Acquire(ctx, "t1")
	require.NoError(t, err)
	st.afterUnlock = func() {
		var err error
		held, err = other.Lock(ctx, "t1") // a concurrent acquire's lock
		require.NoError(t, err)
	}
	require.NoError(t, p.PurgeThread(ctx, "t1"))
	require.NotNil(t, held)
	defer held()
	assert.NoDirExists(t, filepath.Join(home, "threads", "t1", "user-data"), "the thread's files survived the purge")
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	unlock, err := other.Lock(cctx, "t1")
	if err == nil {
		unlock()
	}
	require.ErrorIs(t, err, context.DeadlineExceeded, "two lockers held the thread's lock at once")
	held()
	unlock, err = other.Lock(ctx, "t1")
	require.NoError(t, err, "control: once given back, the lock is free")
	unlock()
}

// exitingBackend runs sandboxes that stop at once: their URL never
// answers and IsAlive says they are gone.
type exitingBackend struct{ *orchestratortest.Backend }

func (exitingBackend) IsAlive(context.Context, orchestrator.SandboxInfo) (bool, error) {
	return false, nil
}

// Issue 35, item 6: a sandbox whose container exits at once is not
// waited on for the whole ready timeout (here an hour): Acquire fails
// with ErrSandboxExited, and nothing is left.
func TestExitedSandboxIsNotWaitedOn(t *testing.T) {
	dead := httptest.NewServer(nil)
	url := dead.URL
	dead.Close()
	b := exitingBackend{&orchestratortest.Backend{URL: func(orchestrator.CreateRequest) string { return url }}}
	p := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: t.TempDir(), ReadyTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := p.Acquire(ctx, "t1")
	require.ErrorIs(t, err, orchestrator.ErrSandboxExited)
	assert.NoError(t, ctx.Err(), "waited until the test's own deadline")
	assert.Zero(t, b.Running())
}

// leasingStore is a FileStore whose owner leases the test ends.
type leasingStore struct {
	*orchestrator.FileStore
	mu     sync.Mutex
	leases []*orchestrator.Lease
	ttl    time.Duration
}

func (s *leasingStore) GrantLease(_ context.Context, owner string) (*orchestrator.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := orchestrator.NewLease(owner, 0, time.Now(), s.ttl, nil)
	s.leases = append(s.leases, l)
	return l, nil
}

func (s *leasingStore) LiveLeases(_ context.Context, owners []string) (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, l := range s.leases {
		out[l.ID()] = out[l.ID()] || l.Err() == nil
	}
	return out, nil
}

func (s *leasingStore) LeaseTTL() time.Duration { return 0 }

func (s *leasingStore) last() *orchestrator.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[len(s.leases)-1]
}

// Issue 35, items 3 and 4: a process whose owner lease ran out (a stall
// longer than its TTL, here a lease never renewed) stops at once: its
// next command is refused with ErrLeaseLost before anything is sent, its
// anonymous sandbox is destroyed and its thread's sandbox left to be
// taken over; the next Acquire continues under a new owner id and takes
// the thread's sandbox over. The control: the same commands run while
// the lease holds.
func TestLostOwnerLeaseStopsAtOnce(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	st := &leasingStore{FileStore: orchestrator.NewFileStore(home), ttl: 2 * time.Second}
	p := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home, Store: st, Owner: "me"})
	ctx := context.Background()
	anon, err := p.Acquire(ctx, "")
	require.NoError(t, err)
	sid, err := p.Acquire(ctx, "t1")
	require.NoError(t, err)
	h, _ := p.Get(sid)
	_, err = h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	require.NoError(t, err, "control: the lease holds")

	st.last().Lose(orchestrator.ErrLockLost) // as a stall past the deadline
	_, err = h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	require.Error(t, err, "a command ran after the owner lease was lost")
	assert.True(t, errors.Is(err, orchestrator.ErrLeaseLost) || errors.Is(err, sandbox.ErrClosed),
		"refused by the lease (or by the handle its end closed): %v", err)
	require.Eventually(t, func() bool { _, ok, _ := b.Discover(ctx, anon); return !ok }, 5*time.Second, 10*time.Millisecond,
		"the anonymous sandbox outlived the lease")
	_, ok, _ := b.Discover(ctx, sid)
	assert.True(t, ok, "the thread's sandbox is left for whoever takes it over")

	again, err := p.Acquire(ctx, "t1")
	require.NoError(t, err)
	assert.Equal(t, sid, again)
	assert.Equal(t, "me-1", p.Owner(), "a new life, a new owner id")
	info, _ := p.Info(sid)
	assert.Equal(t, "me-1", info.Owner, "the dead owner's sandbox was taken over")
	h, _ = p.Get(sid)
	_, err = h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	require.NoError(t, err)
}

// Issue 35, item 4: the owner lease is measured from its grant's sending
// and checked when used: a process that resumes after a stall longer than
// the TTL (no renewal: this store never renews) is refused at its next
// command, before any timer had to run.
func TestOwnerLeaseExpiresByTheClock(t *testing.T) {
	b := newFakeBackend(t)
	home := t.TempDir()
	st := &leasingStore{FileStore: orchestrator.NewFileStore(home), ttl: 300 * time.Millisecond}
	p := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home, Store: st})
	ctx := context.Background()
	sid, err := p.Acquire(ctx, "")
	require.NoError(t, err)
	h, _ := p.Get(sid)
	time.Sleep(400 * time.Millisecond)
	_, err = h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, orchestrator.ErrLeaseLost) || errors.Is(err, sandbox.ErrClosed),
		"refused by the lease (or by the handle its timer closed): %v", err)
}

// Issue 35, item 3: what a crashed process left (its pool slot, its
// anonymous sandbox, its thread's sandbox and state, its slot directory,
// its lease file) is collected by one sweep of another process; while it
// lived, the same sweep collected nothing (the control). A kept sandbox
// (its owner shut down with policy keep) is not collected.
func TestSweepCollectsWhatADeadOwnerLeft(t *testing.T) {
	b := claimingBackend{newFakeBackend(t)}
	home := t.TempDir()
	ctx := context.Background()
	kept, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "kept",
		ShutdownPolicy: orchestrator.PolicyKeep, SweepInterval: -1})
	require.NoError(t, err)
	keptSid, err := kept.Acquire(ctx, "kept-thread")
	require.NoError(t, err)
	require.NoError(t, kept.Shutdown(ctx))

	dying, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "dying", PoolSize: 1, SweepInterval: -1})
	require.NoError(t, err)
	require.NoError(t, dying.WaitPool(ctx, 1))
	_, err = dying.Acquire(ctx, "t1") // claims the slot; the pool refills
	require.NoError(t, err)
	_, err = dying.Acquire(ctx, "")
	require.NoError(t, err)
	require.NoError(t, dying.WaitPool(ctx, 1))
	sweeper := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "sweeper"})
	r, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Empty(t, r.Sandboxes, "control: a live owner's sandboxes were swept")
	running := b.Running()
	assert.Equal(t, 4, running, "kept, t1 (a claimed slot), anonymous, an idle slot")

	orchestrator.Crash(dying)
	r, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"dying"}, r.DeadOwners)
	assert.Len(t, r.Sandboxes, 3, "t1, the anonymous sandbox, the idle slot")
	assert.Equal(t, []string{"t1"}, r.States)
	assert.Equal(t, 1, b.Running(), "only the kept sandbox runs")
	_, ok, _ := b.Discover(ctx, keptSid)
	assert.True(t, ok, "the kept sandbox was swept")
	_, saved, err := orchestrator.NewFileStore(home).Load(ctx, "t1")
	require.NoError(t, err)
	assert.False(t, saved, "the dead owner's state is left")
	slots, _ := os.ReadDir(filepath.Join(home, "pool"))
	assert.Empty(t, slots, "pool slot directories are left")
	assert.NoFileExists(t, filepath.Join(home, "leases", "dying.lock"))
	assert.DirExists(t, filepath.Join(home, "threads", "t1", "user-data", "workspace"), "the thread's files were moved back")
}

// Two homes (two FileStores: two users of one provisioner, or the
// CLI beside a library user) share one backend: a sweep from one home
// leaves the other's sandboxes alone, live or gone, since its store
// never knew their owners (it took them for dead, and a CLI process's
// sweep deleted another home's Pod while it was starting: TestRealNode's
// CLI step, 1 run in 4). A dead owner of its own home it still collects,
// also on a later sweep (the tombstone keeps it dead).
func TestSweepLeavesAnotherHomesSandboxes(t *testing.T) {
	b := claimingBackend{newFakeBackend(t)}
	ctx := context.Background()
	homeA, homeB := t.TempDir(), t.TempDir()
	other, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: homeB, Owner: "other-home", SweepInterval: -1})
	require.NoError(t, err)
	otherSid, err := other.Acquire(ctx, "theirs")
	require.NoError(t, err)
	gone, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: homeB, Owner: "other-home-dead", SweepInterval: -1})
	require.NoError(t, err)
	_, err = gone.Acquire(ctx, "")
	require.NoError(t, err)
	orchestrator.Crash(gone)

	sweeper := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: homeA, Owner: "sweeper"})
	r, err := sweeper.SweepWait(ctx)
	require.NoError(t, err)
	assert.Empty(t, r.DeadOwners, "another home's owners taken for dead")
	assert.Empty(t, r.Sandboxes)
	assert.Equal(t, 2, b.Running(), "another home's sandboxes were swept")

	// The control: the other home's own sweep collects its dead owner's
	// sandbox, and a second sweep still knows that owner for dead.
	mine := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: homeB, Owner: "other-sweeper"})
	r, err = mine.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"other-home-dead"}, r.DeadOwners)
	assert.Len(t, r.Sandboxes, 1)
	assert.FileExists(t, filepath.Join(homeB, "leases", "other-home-dead.gone"), "no tombstone")
	live, err := orchestrator.NewFileStore(homeB).LiveLeases(ctx, []string{"other-home-dead", "other-home", "never-here"})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"other-home-dead": false, "other-home": true}, live, "known dead, known live; a stranger left out")
	_, ok, _ := b.Discover(ctx, otherSid)
	assert.True(t, ok, "a live owner's sandbox was swept")
	require.NoError(t, other.Shutdown(ctx))
	live, err = orchestrator.NewFileStore(homeB).LiveLeases(ctx, []string{"other-home"})
	require.NoError(t, err)
	assert.Empty(t, live, "a released lease is no owner's tombstone")
}

// The FileStore's count: an id is counted once; a former reserver (a
// stale holder whose create failed) cannot give back the count a newer
// reserver of the same thread id shares; a destroy (no owner) can.
func TestFileStoreCount(t *testing.T) {
	s := orchestrator.NewFileStore(t.TempDir())
	ctx := context.Background()
	require.NoError(t, s.Reserve(ctx, "x", "a", 2))
	require.NoError(t, s.Reserve(ctx, "x", "b", 2), "counted once")
	require.NoError(t, s.Reserve(ctx, "y", "a", 2))
	require.ErrorIs(t, s.Reserve(ctx, "z", "a", 2), orchestrator.ErrTooManySandboxes)
	require.NoError(t, s.Unreserve(ctx, "x", "a"))
	require.ErrorIs(t, s.Reserve(ctx, "z", "a", 2), orchestrator.ErrTooManySandboxes, "the former reserver gave back the newer one's count")
	require.NoError(t, s.Unreserve(ctx, "x", ""))
	require.NoError(t, s.Reserve(ctx, "z", "a", 2), "control: a destroy gives the count back")
	got, err := s.Reserved(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"y": "a", "z": "a"}, got)
}

// startingBackend is the in-memory backend with one sandbox that exists
// without running (created; its creator was paused between its Fence and
// the engine's start) and starts right after the first listing call once
// armed: between two of a sweep's listings.
type startingBackend struct {
	*orchestratortest.Backend
	mu      sync.Mutex
	armed   bool
	created *orchestrator.SandboxInfo
}

func (b *startingBackend) afterList() {
	b.mu.Lock()
	c := b.created
	if !b.armed || c == nil {
		b.mu.Unlock()
		return
	}
	b.created = nil
	b.mu.Unlock()
	b.Backend.Create(context.Background(), orchestrator.CreateRequest{SandboxID: c.SandboxID, Owner: c.Owner})
}

func (b *startingBackend) ListRunning(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	defer b.afterList()
	return b.Backend.ListRunning(ctx)
}

func (b *startingBackend) ListStopped(context.Context) ([]orchestrator.SandboxInfo, error) {
	defer b.afterList()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.created == nil {
		return nil, nil
	}
	info := *b.created
	info.URL = ""
	return []orchestrator.SandboxInfo{info}, nil
}

// A sweep gives back a dead owner's max_sandboxes count only for a
// sandbox it does not see running or stopped, in a listing made after it
// decided the owner is dead. The attack (what the fault test's nemesis
// did: 9 sandboxes ran with max_sandboxes 8): the owner is paused between
// its Fence and the engine's start, the sweep lists the running
// sandboxes, the start lands, the sweep lists the stopped ones; the
// sandbox was in neither listing, its count was given back, and it ran
// uncounted. Now it is seen, and destroyed; every running sandbox is
// counted after the sweep.
func TestSweepSeesASandboxStartingBetweenListings(t *testing.T) {
	b := &startingBackend{Backend: newFakeBackend(t)}
	home := t.TempDir()
	ctx := context.Background()
	dying, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "dying", MaxSandboxes: 4, SweepInterval: -1})
	require.NoError(t, err)
	sid, err := dying.Acquire(ctx, "")
	require.NoError(t, err)
	info, ok, _ := b.Discover(ctx, sid)
	require.True(t, ok)
	b.Vanish(sid) // created, not yet started
	b.created = &info
	orchestrator.Crash(dying)

	sweeper := newProvider(t, orchestrator.ProviderOptions{Backend: b, Home: home, Owner: "sweeper", MaxSandboxes: 4})
	b.mu.Lock()
	b.armed = true
	b.mu.Unlock()
	r, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"dying"}, r.DeadOwners)
	counted, err := orchestrator.NewFileStore(home).Reserved(ctx)
	require.NoError(t, err)
	running, err := b.ListRunning(ctx)
	require.NoError(t, err)
	for _, info := range running {
		assert.Contains(t, counted, info.SandboxID, "sandbox %s runs, and its count was given back", info.SandboxID)
	}
	assert.Equal(t, []string{sid}, r.Sandboxes, "the sandbox that started during the sweep is collected")
}
