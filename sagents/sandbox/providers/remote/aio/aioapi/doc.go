// Package aioapi is the AIO Sandbox HTTP API (agent-infra/sandbox,
// OpenAPI v1.9.4) as the project speaks it: the wire types (wire.go), a
// typed Client for the endpoints used (client.go), the errors a server
// answers (*APIError, which matches fs.ErrNotExist and fs.ErrPermission
// where the server says so), WaitReady, and the token file a local
// `sage sandboxd` writes (TokenFile, ReadTokenFile).
//
// One http.Client per sandbox, keep-alive, per-call deadlines from the
// context, an optional bearer token, and no proxy for loopback and
// private addresses. Non-2xx answers and success:false envelopes become
// *APIError values.
//
// It has no registration side effects and imports no Docker, Redis or
// Kubernetes package: the server (aioserver), the remote driver
// (aiodriver) and the orchestrator share it.
//
// Its API: the wire types, Client (NewClient, ClientOptions) and its endpoint
// methods, *APIError, WaitReady (ReadyOptions), TokenFile and ReadTokenFile.
// The rest is the client's own.
package aioapi
