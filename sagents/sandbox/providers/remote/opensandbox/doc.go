// Package opensandbox is the remote provider "opensandbox": sandboxes that
// an OpenSandbox lifecycle server creates, driven through the execd
// daemon inside each sandbox.
//
// The package has three layers, each in its own files:
//
//   - the wire layer: LifecycleClient (lifecycle.go) creates, finds,
//     renews, pauses, resumes and deletes sandboxes and resolves the
//     endpoint of a port; ExecdClient (execd.go, execd_files.go) runs
//     commands streamed as events (sse.go), reads background command
//     status and logs, interrupts, runs Python in code contexts, moves
//     files and directories through the file API and reads metrics.
//     Every response body is read with a bound.
//   - the sandbox (osSandbox: sandbox.go, exec.go, files.go,
//     background.go) and its driver.Driver (osDriver, driver.go).
//     lines.go rebuilds a command's output from execd's line events and
//     its output files, the exact bytes.
//   - configuration (config.go, provider.go): the provider_config keys
//     (key*), their defaults and SAGE_OPENSANDBOX_* variables, read by
//     configFrom, and remote.Register("opensandbox").
//
// One sandbox serves one thread id: it carries the metadata label
// sage.thread=<id>, so another process finds it again with a filtered
// list instead of creating a second one.
//
// The API is small: importing the package registers the remote provider
// "opensandbox", which a user reaches through sagents/sandbox (mode
// remote, remote provider opensandbox, provider_config as docs/remote.md
// lists it). Exported besides are the errors a caller matches
// (ErrSandboxGone, *APIError) and, for tools and tests that inspect or
// clean up a server's sandboxes (cmd/sage's tests do), the clients'
// constructors NewLifecycleClient and NewExecdClient with the few
// methods those callers use (List, Delete, RemoveDirs), SandboxInfo,
// Status and LabelThread. Everything else (the sandbox, its
// configuration, execd's events, requests and file descriptions) is the
// package's own.
//
// Remote errors are *APIError values; 404 matches fs.ErrNotExist, 401
// and 403 match fs.ErrPermission, 409 matches fs.ErrExist.
package opensandbox
