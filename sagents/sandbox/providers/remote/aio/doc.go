// Package aio speaks the AIO Sandbox HTTP API (agent-infra/sandbox,
// OpenAPI v1.9.4) and registers the remote provider "aio".
//
// The package has four parts:
//
//   - Client (client.go, wire.go, errors.go): a typed client for the
//     endpoints the project uses. One http.Client per sandbox, keep-alive,
//     per-call deadlines from the context, an optional bearer token, and no
//     proxy for loopback and private addresses. Non-2xx answers and
//     success:false envelopes become *APIError values, which match
//     fs.ErrNotExist and fs.ErrPermission where the server says so.
//   - Handle (handle.go, lanes.go, fileops.go, background.go): a
//     sandbox.Handle over the client. Commands run through /v1/bash/exec in
//     a shell session that no other call uses at the same time (a pool of
//     "lanes"); files go through /v1/file/*; background tasks are async
//     bash commands in their own session.
//   - Registration (provider.go): remote.Register("aio", ...), so that
//     sandbox.New with Mode remote, Remote.Provider "aio" and a ServerURL
//     returns a Handle on that server; without a ServerURL it
//     orchestrates (below).
//   - The orchestrating Provider (interfaces.go for SandboxInfo, Backend
//     and StateStore; acquire.go, lifecycle.go, activity.go, fence.go,
//     threads.go; registry.go for the backend and store registries):
//     Acquire(ctx, thread) gives every process the same sandbox per
//     thread: the in-process cache; then, under the state store's lock,
//     the saved SandboxInfo confirmed by Backend.Discover (adopted, or
//     removed if stale); then Backend.Create + WaitReady, destroyed again
//     on any failure. Sandbox ids are 16 hex digits of sha256(thread);
//     thread ids are validated before anything touches disk or a backend.
//     An idle reaper (IdleTimeout, 0 disables; requests in flight and
//     running background tasks count as use, and Toucher backends are
//     touched) and an idempotent Shutdown (policy release or keep) end
//     them. A FencedLocker store (redis) cancels the holder's context
//     with ErrLockLost when its lock is lost, and fences its writes. Backends and state stores
//     register by name (RegisterBackend, RegisterStateStore): the file
//     store is built in; import aio/dockerbackend for "docker",
//     aio/redisstore for "redis", and the provisioner client for
//     "provisioner".
//
// Sandboxes created through the sage-sandbox image run `sage sandboxd
// --mode passthrough` inside the container (the container is the
// isolation boundary; there is no bwrap in it) and require a bearer token
// that the provider generates per sandbox, passes in SAGE_SANDBOXD_TOKEN
// and keeps in the saved state; sandboxd does not pass that variable on
// to commands.
//
// A `sage sandboxd` on this machine started without --token makes a token
// and saves it in TokenFile ($SAGE_HOME/sandboxd/token, 0600); Open with
// no Token and a loopback ServerURL sends that token when the file exists.
//
// The server side, `sage sandboxd`, lives in the aioserver sub-package.
package aio
