// Package aioserver serves one *sandbox.Sandbox over the subset of the AIO
// Sandbox HTTP API (OpenAPI v1.9.4) that package aio's client uses, with
// the same paths and JSON shapes; it is the engine of `sage sandboxd`.
//
// Endpoints: GET /v1/sandbox; POST /v1/shell/exec, /v1/shell/view,
// /v1/shell/wait, /v1/shell/kill, /v1/shell/write,
// /v1/shell/sessions/create, GET and DELETE /v1/shell/sessions, DELETE
// /v1/shell/sessions/{id}; POST /v1/bash/exec (sync and async),
// /v1/bash/output, /v1/bash/kill, /v1/bash/write,
// /v1/bash/sessions/create, GET /v1/bash/sessions, POST
// /v1/bash/sessions/{id}/close; POST /v1/file/read, /v1/file/write,
// /v1/file/list, /v1/file/upload, /v1/file/find, /v1/file/glob,
// /v1/file/grep, /v1/file/replace, /v1/file/search,
// /v1/file/str_replace_editor, GET /v1/file/download; POST
// /v1/code/execute, /v1/jupyter/execute, /v1/nodejs/execute.
//
// Sessions: a /v1/shell session is one long-lived bash (NewLiveShell):
// the working directory, variables, functions and background jobs a
// command leaves are there for the next. Commands go in over the shell's
// stdin with a sentinel protocol; where bash cannot run that way (no bash,
// a remote Handle), the session replays its working directory and
// exports on each command instead (NewReplayShell). Its output is stdout
// and stderr in one pipe, in the order written. Every sync exec runs in a
// goroutine of the server and is recorded in its session (one is created
// when the request names none), so a request's timeout can answer status
// running while the command goes on, and /v1/bash/output, /v1/shell/view, wait, write and kill reach it.
// /v1/bash/exec commands do not share state (the remote Handle runs
// unrelated commands in a pool of sessions); async_mode ones run the same
// way with no time limit but hard_timeout, stdout and stderr apart (a
// window of their latest 4 MiB or more each, read by absolute offsets)
// and a stdin /v1/bash/write feeds.
//
// Code: /v1/code/execute, /v1/jupyter/execute and (stateful)
// /v1/nodejs/execute run code in one long-lived python3 or node per
// session, started in the sandbox through the Handle and fed over its
// stdin (see kernel): a variable set in one call is there in the next,
// without re-running earlier code.
//
// Globs: find and glob match the path relative to the searched directory
// with ** as zero or more directories (Python's recursive glob), using
// github.com/bmatcuk/doublestar/v4.
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
// success; an expected failure of a file operation (missing file,
// permission, a path outside the workspace, bad argument, I/O error) is
// also 200, with success false and a FileOperationError as data, as the
// AIO documentation says (the SDKs return it as data). Otherwise: 422
// with FastAPI's {detail: [...]} for malformed JSON, wrong types and
// missing required fields (the spec's documented error); and, with the
// envelope, 400 bad argument, 401 missing or wrong bearer token, 403 an
// exec_dir or download outside the workspace or a foreign Origin, 404 a
// missing download, session or command, 408 a request body that arrives
// too slowly, 413 a body over the limit, 415 a JSON endpoint sent another
// content type, 421 a Host that is not served, 501 an operation the
// sandbox lacks, 503 not ready or shutting down.
//
// Signals: an exit code ended by signal n is reported as -n (Python's
// subprocess convention); the aio client maps it back to 128+n.
package aioserver
