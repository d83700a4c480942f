package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

var (
	_ orchestrator.Leaser  = (*Store)(nil)
	_ orchestrator.Counter = (*Store)(nil)
)

// leaseKey is <prefix>lease:<owner>. The colon keeps it out of List
// (thread ids have none).
func (s *Store) leaseKey(owner string) (string, error) {
	if !driver.ValidID(owner) {
		return "", fmt.Errorf("redisstore: owner id %q: want 1-64 characters of A-Z a-z 0-9 _ -", owner)
	}
	return s.o.Prefix + "lease:" + owner, nil
}

// GrantLease sets owner's lease key (SET NX PX LeaseTTL with a random
// token) and renews it every LeaseTTL/3, measured from each renewal's
// sending; it ends when a renewal finds the key gone or another's, or
// when none succeeded within a TTL.
func (s *Store) GrantLease(ctx context.Context, owner string) (*orchestrator.Lease, error) {
	k, err := s.leaseKey(owner)
	if err != nil {
		return nil, err
	}
	token := randomToken()
	sent := time.Now()
	ok, err := s.rdb.SetNX(ctx, k, token, s.o.LeaseTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: owner lease %s: %w", owner, err)
	}
	if !ok {
		return nil, fmt.Errorf("redisstore: owner lease %s: another live process holds it (fix: give each process its own owner id)", owner)
	}
	var stop func()
	l := orchestrator.NewLease(owner, 0, sent, s.o.LeaseTTL, func() {
		stop()
		s.unlock(k, token)
	})
	stop = s.hold(k, token, l, true)
	return l, nil
}

// LiveLeases asks Redis which of owners' lease keys exist.
func (s *Store) LiveLeases(ctx context.Context, owners []string) (map[string]bool, error) {
	out := make(map[string]bool, len(owners))
	pipe := s.rdb.Pipeline()
	cmds := make(map[string]*redis.IntCmd, len(owners))
	for _, o := range owners {
		k, err := s.leaseKey(o)
		if err != nil {
			out[o] = false
			continue
		}
		cmds[o] = pipe.Exists(ctx, k)
	}
	if len(cmds) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: owner leases: %w", err)
	}
	for o, c := range cmds {
		out[o] = c.Val() == 1
	}
	return out, nil
}

// LeaseTTL is Options.LeaseTTL.
func (s *Store) LeaseTTL() time.Duration { return s.o.LeaseTTL }

// counterKey is the hash of reservations: sandbox id -> owner.
func (s *Store) counterKey() string { return s.o.Prefix + "count:sandboxes" }

// reserveScript counts ARGV[1] for ARGV[2] unless ARGV[3] (> 0) ids are
// counted already: 1 done, 0 full (with the count in the reply's error).
var reserveScript = redis.NewScript(`
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 then
  local n = redis.call("HLEN", KEYS[1])
  if tonumber(ARGV[3]) > 0 and n >= tonumber(ARGV[3]) then return -n - 1 end
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
return 1`)

// Reserve counts id in one script, so two hosts never both take the
// last place.
func (s *Store) Reserve(ctx context.Context, id, owner string, max int) error {
	n, err := reserveScript.Run(ctx, s.rdb, []string{s.counterKey()}, id, owner, max).Int()
	if err != nil {
		return fmt.Errorf("redisstore: reserve %s: %w", id, err)
	}
	if n < 0 {
		return fmt.Errorf("%w: %d of %d counted (release one, or raise max_sandboxes)", orchestrator.ErrTooManySandboxes, -n-1, max)
	}
	return nil
}

// unreserveScript stops counting ARGV[1], only while it is counted for
// ARGV[2] when that is set.
var unreserveScript = redis.NewScript(`
if ARGV[2] ~= "" and redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call("HDEL", KEYS[1], ARGV[1])`)

// Unreserve stops counting id (owner set: only while counted for owner).
func (s *Store) Unreserve(ctx context.Context, id, owner string) error {
	if err := unreserveScript.Run(ctx, s.rdb, []string{s.counterKey()}, id, owner).Err(); err != nil {
		return fmt.Errorf("redisstore: unreserve %s: %w", id, err)
	}
	return nil
}

// Reserved lists the reservations.
func (s *Store) Reserved(ctx context.Context) (map[string]string, error) {
	m, err := s.rdb.HGetAll(ctx, s.counterKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: reservations: %w", err)
	}
	return m, nil
}
