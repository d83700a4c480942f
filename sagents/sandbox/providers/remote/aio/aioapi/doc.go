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
// Hand-written rather than generated with oapi-codegen from the upstream
// document: that document is OpenAPI 3.1.0, which oapi-codegen does not
// support (its issue #373 is open), and it would generate 140 operations
// and 255 schemas for the 18 calls sage makes (the subset sage sandboxd
// serves is api/aio-subset.openapi.yaml). What a generated client would
// get wrong is what this one is written around: the document lists only
// 200 and 422 (one operation 409), but a server, or a proxy or an auth
// layer in front of it, answers others (401, 403, 404, 5xx), which must
// become *APIError values (404 matching fs.ErrNotExist, 403
// fs.ErrPermission); file errors come as 200 with a
// success:false envelope whose error_type vocabulary the document leaves
// open (ErrType*, and errno names); and every body is read with a bound.
// The aioserver tests validate this client's traffic with sage sandboxd
// against the subset document and, when a checkout has it, the upstream
// one (internal/spectest, kin-openapi), so drift shows up there.
//
// Its API: the wire types, Client (NewClient, ClientOptions) and its endpoint
// methods, *APIError, WaitReady (ReadyOptions), TokenFile and ReadTokenFile.
// The rest is the client's own.
package aioapi
