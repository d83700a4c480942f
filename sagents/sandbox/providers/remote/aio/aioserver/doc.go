// Package aioserver serves one sandbox.Handle over the subset of the AIO
// Sandbox HTTP API (OpenAPI v1.9.4) that package aio's client uses, with
// the same paths and JSON shapes; it is the engine of `sage sandboxd`.
//
// Endpoints: GET /v1/sandbox; POST /v1/shell/exec,
// /v1/shell/sessions/create, DELETE /v1/shell/sessions/{id}; POST
// /v1/bash/exec (sync and async), /v1/bash/output, /v1/bash/kill,
// /v1/bash/sessions/create, /v1/bash/sessions/{id}/close; POST
// /v1/file/read, /v1/file/write, /v1/file/list, /v1/file/upload,
// /v1/file/find, /v1/file/grep, GET /v1/file/download.
//
// Browser safety: every request is checked before the token. A Host
// header that is not a loopback name or address, the address the
// connection arrived on, or one of Options.AllowedHosts gets 421 (DNS
// rebinding cannot read answers); an Origin header other than the
// server's own origin or Options.AllowedOrigins gets 403; a JSON endpoint
// refuses any Content-Type but application/json with 415 (a web page can
// send text/plain or a form anywhere without a CORS preflight, never
// JSON). /v1/file/upload takes multipart/form-data, as the spec says.
//
// Bounds: /v1/file/read returns at most Options.MaxReadBytes of content
// (16 MiB by default; it reads one byte more to know, and a larger file
// is a 400 whose hint points to /v1/file/download); /v1/file/download
// streams the file; /v1/file/list, find and grep read at most
// Options.MaxEntries entries (10000 by default) and then answer with
// truncated: true (a sage extension of the list and find results).
//
// Status codes: 200 with the {success, message, data, hint} envelope on
// success; 422 with FastAPI's {detail: [...]} for malformed JSON, wrong
// types and missing required fields (the spec's documented error); and,
// with the envelope (data holding a FileOperationError for file
// endpoints), 400 bad argument, 401 missing or wrong bearer token, 403 a
// path outside the workspace or a foreign Origin, 404 a missing file,
// session or directory, 408 a request body that arrives too slowly, 413 a
// body over the limit, 415 a JSON endpoint sent another content type, 421
// a Host that is not served, 503 not ready or shutting down.
//
// Signals: an exit code ended by signal n is reported as -n (Python's
// subprocess convention); the aio client maps it back to 128+n.
package aioserver
