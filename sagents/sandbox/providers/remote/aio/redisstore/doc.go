// Package redisstore is the aio provider's Redis state store, for
// processes on several hosts. Importing it registers the state store
// "redis" with orchestrator.RegisterStateStore (address: a redis:// URL).
//
// State is JSON (the seed format) under sage:sandbox:<thread>. The
// thread's lock is sage:sandbox:<thread>:lock, taken by a Lua script (SET
// PX if absent, with a random token) that also returns its fencing token
// (the server's time in microseconds, above the thread's last one in
// sage:sandbox:<thread>:fence), renewed at a third of its TTL while held,
// and released by a compare-and-delete script, so a crashed holder's lock
// expires after the TTL and a slow holder never deletes someone else's
// lock. The holder counts the TTL from each renewal's sending, so it
// stops before Redis lets another take the lock. Owner leases are
// sage:sandbox:lease:<owner> (same renewal), and the max_sandboxes count
// is the hash sage:sandbox:count:sandboxes, changed by one script. Run
// Redis with appendfsync always: one that forgets keys forgets locks.
// When Redis is unreachable every operation fails with an error (and
// Acquire with it): the provider never falls back to creating a second
// sandbox.
//
// Hand-written rather than github.com/bsm/redislock (not a dependency): a
// redislock Lock (v0.10.0: Obtain, Refresh, Release, a random token) is
// the compare-and-delete lock above and no more. What this store needs
// besides lives in Lua scripts that read the lock's own key: the fencing
// token taken atomically with the lock and kept monotonic per thread
// across holders (sage:sandbox:<thread>:fence), writes of the thread's
// saved state that Redis itself refuses unless the writer still holds
// the lock (fencedSet, fencedDel: checking the token in Go and
// then writing would let a paused holder write after losing it), owner
// leases, and the max_sandboxes count reserved and released in one
// script. A library lock would leave all of that to write here anyway,
// as a second set of keys and scripts beside its own.
//
// Its API: Open (a redis:// URL) and New (a client of your own) with
// Options, and *Store, an orchestrator.StateStore with the Leaser, Counter
// and FencedLocker capabilities.
package redisstore
