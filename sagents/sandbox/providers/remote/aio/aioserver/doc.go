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
// Status codes: 200 with the {success, message, data, hint} envelope on
// success; 422 with FastAPI's {detail: [...]} for malformed JSON, wrong
// types and missing required fields (the spec's documented error); and,
// with the envelope (data holding a FileOperationError for file
// endpoints), 400 bad argument, 401 missing or wrong bearer token, 403 a
// path outside the workspace, 404 a missing file, session or directory,
// 408 a request body that arrives too slowly, 413 a body over the limit,
// 503 not ready or shutting down.
//
// Signals: an exit code ended by signal n is reported as -n (Python's
// subprocess convention); the aio client maps it back to 128+n.
package aioserver
