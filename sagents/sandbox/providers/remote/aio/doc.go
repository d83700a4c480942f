// Package aio speaks the AIO Sandbox HTTP API (agent-infra/sandbox,
// OpenAPI v1.9.4) and registers the remote provider "aio".
//
// The package has three parts:
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
//     returns a Handle.
//
// The server side, `sage sandboxd`, lives in the aioserver sub-package.
package aio
