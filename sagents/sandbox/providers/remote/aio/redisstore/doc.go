// Package redisstore is the aio provider's Redis state store, for
// processes on several hosts. Importing it registers the state store
// "redis" with orchestrator.RegisterStateStore (address: a redis:// URL).
//
// State is JSON (the seed format) under sage:sandbox:<thread>. The
// thread's lock is sage:sandbox:<thread>:lock, taken with SET NX PX and a
// random token, renewed at a third of its TTL while held, and released by
// a compare-and-delete Lua script, so a crashed holder's lock expires
// after the TTL and a slow holder never deletes someone else's lock.
// When Redis is unreachable every operation fails with an error (and
// Acquire with it): the provider never falls back to creating a second
// sandbox.
package redisstore
