package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/unfenced"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// storeName is the state store name this package registers.
const storeName = "redis"

// defaultAddr is used when the address is empty.
const defaultAddr = "redis://127.0.0.1:6379/0"

func init() {
	orchestrator.RegisterStateStore(storeName, func(addr string) (orchestrator.StateStore, error) { return Open(addr, Options{}) })
}

// Options configure Open.
type Options struct {
	// Prefix starts every key (default "sage:sandbox:").
	Prefix string
	// LockTTL is the lock's expiry; it is renewed every LockTTL/3 while
	// held (default 10 s). Its holder counts it from each renewal's
	// sending and stops when it runs out.
	LockTTL time.Duration
	// LeaseTTL is an owner lease's expiry, renewed every LeaseTTL/3
	// (default 10 s): a process that dies or loses Redis for that long
	// is dead to the others, which then collect its sandboxes.
	LeaseTTL time.Duration
	// Poll is how often a blocked Lock retries (default 10 ms).
	Poll   time.Duration
	Logger *slog.Logger
}

// Store is the Redis orchestrator.StateStore.
type Store struct {
	rdb *redis.Client
	o   Options
}

var (
	_ orchestrator.StateStore   = (*Store)(nil)
	_ orchestrator.FencedLocker = (*Store)(nil)
)

// Open connects to a redis:// URL ("" means redis://127.0.0.1:6379/0). It does not
// dial; the first operation does.
func Open(addr string, o Options) (*Store, error) {
	if addr == "" {
		addr = defaultAddr
	}
	opt, err := redis.ParseURL(addr)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	opt.MaxRetries = 1
	return New(redis.NewClient(opt), o), nil
}

// New wraps a client.
func New(rdb *redis.Client, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = "sage:sandbox:"
	}
	if o.LockTTL <= 0 {
		o.LockTTL = 10 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 10 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Store{rdb: rdb, o: o}
}

// Close closes the client.
func (s *Store) Close() error { return s.rdb.Close() }

func (s *Store) key(threadID string) (string, error) {
	if !driver.ValidID(threadID) {
		return "", fmt.Errorf("redisstore: %w", &orchestrator.InvalidThreadError{ThreadID: threadID})
	}
	return s.o.Prefix + threadID, nil
}

// Save stores info as JSON.
func (s *Store) Save(ctx context.Context, threadID string, info orchestrator.SandboxInfo) error {
	k, err := s.key(threadID)
	if err != nil {
		return err
	}
	data, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if err := s.write(ctx, threadID, k, data); err != nil {
		return fmt.Errorf("redisstore: save %s: %w", threadID, err)
	}
	return nil
}

// Load reads the thread's state; a missing key is a miss and a corrupt
// value is logged and treated as one. An unreachable Redis is an error.
func (s *Store) Load(ctx context.Context, threadID string) (orchestrator.SandboxInfo, bool, error) {
	k, err := s.key(threadID)
	if err != nil {
		return orchestrator.SandboxInfo{}, false, err
	}
	data, err := s.rdb.Get(ctx, k).Bytes()
	if errors.Is(err, redis.Nil) {
		return orchestrator.SandboxInfo{}, false, nil
	}
	if err != nil {
		return orchestrator.SandboxInfo{}, false, fmt.Errorf("redisstore: load %s: %w", threadID, err)
	}
	var info orchestrator.SandboxInfo
	if err := json.Unmarshal(data, &info); err != nil || info.SandboxID == "" {
		s.o.Logger.Warn("redisstore: ignoring unreadable sandbox state", "key", k, "err", err)
		return orchestrator.SandboxInfo{}, false, nil
	}
	return info, true, nil
}

// Remove deletes the thread's state.
func (s *Store) Remove(ctx context.Context, threadID string) error {
	k, err := s.key(threadID)
	if err != nil {
		return err
	}
	if err := s.write(ctx, threadID, k, nil); err != nil {
		return fmt.Errorf("redisstore: remove %s: %w", threadID, err)
	}
	return nil
}

// List returns every thread with readable state.
func (s *Store) List(ctx context.Context) (map[string]orchestrator.SandboxInfo, error) {
	out := map[string]orchestrator.SandboxInfo{}
	iter := s.rdb.Scan(ctx, 0, s.o.Prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		thread := iter.Val()[len(s.o.Prefix):]
		if !driver.ValidID(thread) {
			continue // the :lock keys
		}
		if info, ok, err := s.Load(ctx, thread); err == nil && ok {
			out[thread] = info
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: list: %w", err)
	}
	return out, nil
}

// unlockScript deletes the lock only if it still holds our token.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// renewScript extends the lock only if it still holds our token.
var renewScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`)

// lockScript takes KEYS[1] (the lock) for ARGV[1] (our token) for
// ARGV[2] ms if nobody holds it, and returns its fencing token: the
// server's time in microseconds, or one more than the last token of this
// thread (KEYS[2], kept for ARGV[3] ms) if the clock went back, so tokens
// only grow, across restarts too. 0: held by another.
var lockScript = redis.NewScript(`
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
local t = redis.call("TIME")
local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call("GET", KEYS[2]) or "0")
if f <= last then f = last + 1 end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
redis.call("SET", KEYS[2], string.format("%d", f), "PX", ARGV[3])
return f`)

// Lock takes the thread's lock (SET NX PX with a random token), retrying
// until ctx ends, and renews it in the background until unlock. Use
// LockFenced to learn when the lock is lost.
func (s *Store) Lock(ctx context.Context, threadID string) (func(), error) {
	_, unlock, err := s.LockFenced(ctx, threadID)
	return unlock, err
}

// LockFenced is Lock that also returns a context derived from ctx,
// cancelled with cause orchestrator.ErrLockLost when the lock is lost:
// another token holds it, or no renewal succeeded within a TTL of its
// sending. The context carries the lock's orchestrator.Lease (its
// fencing token for the backends: orchestrator.Fence). Save and Remove
// under that context write only while the lock holds its token (checked
// by Redis in the same script), so a former holder's late write is
// refused with orchestrator.ErrLockLost.
func (s *Store) LockFenced(ctx context.Context, threadID string) (context.Context, func(), error) {
	k, err := s.key(threadID)
	if err != nil {
		return nil, nil, err
	}
	lk := k + ":lock"
	token := randomToken()
	for {
		sent := time.Now()
		f, err := lockScript.Run(ctx, s.rdb, []string{lk, k + ":fence"}, token, s.o.LockTTL.Milliseconds(), (4 * s.o.LockTTL).Milliseconds()).Int64()
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: lock %s: %w", threadID, err)
		}
		if f > 0 {
			l := orchestrator.NewLease("", f, sent, s.o.LockTTL, nil)
			stop := s.hold(lk, token, l, false)
			held, lost := context.WithCancelCause(context.WithValue(orchestrator.WithLease(ctx, l), fenceKey{}, fence{key: lk, token: token}))
			release := context.AfterFunc(l.Context(), func() { lost(context.Cause(l.Context())) })
			var once sync.Once
			return held, func() {
				once.Do(func() {
					stop()
					release()
					lost(context.Canceled)
					l.Release()
					s.unlock(lk, token)
				})
			}, nil
		}
		t := time.NewTimer(s.o.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, fmt.Errorf("redisstore: lock %s: %w", threadID, ctx.Err())
		case <-t.C:
		}
	}
}

func (s *Store) unlock(k, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := unlockScript.Run(ctx, s.rdb, []string{k}, token).Err(); err != nil {
		s.o.Logger.Warn("redisstore: could not release lock (it expires)", "key", k, "err", err)
	}
}

// fence is the lock a context holds (LockFenced).
type fence struct{ key, token string }

type fenceKey struct{}

// hold renews k (holding token) every TTL/3 until the returned
// (idempotent) stop. A renewal that succeeds moves l's deadline to its
// sending time plus the TTL; one that finds another token (or none)
// ends l with orchestrator.ErrLockLost; failures are retried until l's
// own timer ends it. With fencing off (the control of the fault test)
// an owner lease (regrant) never ends: one whose key is gone is set
// again, as a process that knows nothing of leases would go on.
func (s *Store) hold(k, token string, l *orchestrator.Lease, regrant bool) func() {
	ttl := l.TTL()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		answered := time.Now() // what fencing off measures from
		for {
			select {
			case <-stop:
				return
			case <-l.Done():
				return
			case <-t.C:
			}
			sent := time.Now()
			wait := ttl / 3
			if d := l.Deadline(); !d.IsZero() {
				wait = min(wait, time.Until(d))
			}
			ctx, cancel := context.WithTimeout(context.Background(), max(wait, time.Millisecond))
			n, err := renewScript.Run(ctx, s.rdb, []string{k}, token, ttl.Milliseconds()).Int()
			if err == nil && n == 0 && regrant && unfenced.Off.Load() {
				n, err = 1, s.rdb.Set(ctx, k, token, ttl).Err()
			}
			cancel()
			switch {
			case err == nil && n == 1:
				l.Renewed(sent)
				answered = time.Now()
			case err == nil:
				s.o.Logger.Warn("redisstore: lease lost: another holder has it, or it expired", "key", k)
				l.Lose(orchestrator.ErrLockLost)
				return
			case unfenced.Off.Load() && !regrant && time.Since(answered) >= ttl:
				s.o.Logger.Warn("redisstore: lease lost: no renewal answered for a TTL", "key", k, "err", err)
				l.Lose(orchestrator.ErrLockLost)
				return
			default:
				s.o.Logger.Warn("redisstore: could not renew lease", "key", k, "err", err)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop); <-done }) }
}

// fencedSet and fencedDel write only while KEYS[2] (the lock) holds
// ARGV[1] (our token); they return -1 otherwise.
var (
	fencedSet = redis.NewScript(`if redis.call("GET", KEYS[2]) ~= ARGV[1] then return -1 end redis.call("SET", KEYS[1], ARGV[2]) return 1`)
	fencedDel = redis.NewScript(`if redis.call("GET", KEYS[2]) ~= ARGV[1] then return -1 end return redis.call("DEL", KEYS[1])`)
)

// write sets (data != nil) or deletes k, fenced by the lock ctx holds,
// if any, for this thread.
func (s *Store) write(ctx context.Context, threadID, k string, data []byte) error {
	f, fenced := ctx.Value(fenceKey{}).(fence)
	if !fenced || f.key != k+":lock" {
		if data == nil {
			return s.rdb.Del(ctx, k).Err()
		}
		return s.rdb.Set(ctx, k, data, 0).Err()
	}
	if ctx.Err() != nil {
		if c := context.Cause(ctx); errors.Is(c, orchestrator.ErrLockLost) {
			return c
		}
		return ctx.Err()
	}
	var n int
	var err error
	if data == nil {
		n, err = fencedDel.Run(ctx, s.rdb, []string{k, f.key}, f.token).Int()
	} else {
		n, err = fencedSet.Run(ctx, s.rdb, []string{k, f.key}, f.token, data).Int()
	}
	if err == nil && n == -1 {
		return fmt.Errorf("thread %s: %w", threadID, orchestrator.ErrLockLost)
	}
	return err
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
