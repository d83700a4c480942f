// Package orchestrator is the orchestrating AIO provider: one sandbox
// per conversation thread, shared by every process that uses the same
// backend and state store.
//
// Its small interfaces are what the backends and stores implement:
// SandboxInfo, CreateRequest, Backend (dockerbackend, the provisioner
// client) and StateStore (FileStore, built in; redisstore), plus the
// optional Toucher, Lister and FencedLocker. Backends and stores register
// by name (RegisterBackend, RegisterStateStore) as database/sql drivers
// do; import aio/dockerbackend for "docker", aio/redisstore for "redis"
// and aio/provisioner for "provisioner".
//
// Acquire(ctx, thread) gives every process the same sandbox per thread:
// the in-process cache; then, under the state store's lock, the saved
// SandboxInfo confirmed by Backend.Discover (adopted, or removed if
// stale); then a new sandbox (Backend.Create + WaitReady), destroyed
// again on any failure. Sandbox ids are 16 hex digits of sha256(thread);
// thread ids are validated before anything touches disk or a backend. An
// idle reaper (IdleTimeout, 0 disables; requests in flight and running
// background tasks count as use, and Toucher backends are touched) and an
// idempotent Shutdown (policy release or keep) end them. A FencedLocker
// store (redis) cancels the holder's context with ErrLockLost when its
// lock is lost, and fences its writes.
//
// Leases (lease.go): a Lease is a thread's lock, with its fencing token,
// or a process's owner lease, measured by its holder from the sending of
// its grant and renewals and checked when used. A Leaser store (redis,
// FileStore) keeps owner leases: every sandbox, pool slot and saved state
// carries its owner's id, a process whose lease lapsed stops using its
// sandboxes at once (and goes on under a new owner id), and Sweep
// collects what owners whose lease ended left. The leases travel in the
// context; backends ask Fence(ctx) before they create, destroy, adopt or
// claim, and compare the token with the one the sandbox carries
// (CheckFence; the optional Adopter stamps an adopter's). A Counter store
// counts the deployment's sandboxes for max_sandboxes.
//
// ProviderFromConfig reads the provider_config map and the SAGE_AIO_*
// environment; NewDriver is what the remote provider "aio" (registered
// by the parent package) calls when no server_url is given.
//
// Sandboxes created through the sage-sandbox image run `sage sandboxd
// --mode passthrough` inside the container (the container is the
// isolation boundary) and require a bearer token that the provider
// generates per sandbox, passes in SAGE_SANDBOXD_TOKEN (TokenEnv) and
// keeps in the saved state; sandboxd does not pass that variable on to
// commands.
//
// Its API has three readers. An application: NewProvider (ProviderOptions,
// the Default* values, the Policy* values, the mount paths) or
// ProviderFromConfig (the Key* names of provider_config), *Provider and its
// Pool and Sweep reports, NewDriver, and the Err* sentinels. A backend:
// Backend, SandboxInfo, CreateRequest, the optional Toucher, Pooler,
// Snapshotter, StoppedLister and Adopter, RegisterBackend and NewBackend,
// Fence, Held, CheckFence and TokenEnv. A state store: StateStore, FileStore,
// the optional Lister, Leaser, Counter and FencedLocker, Lease (NewLease,
// WithLease, WithFence), RegisterStateStore and NewStateStore.
package orchestrator
