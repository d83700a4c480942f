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
//   - the sandbox (sandbox.go, exec.go, files.go, background.go) and its
//     driver.Driver (driver.go). lines.go rebuilds a command's output
//     from execd's line events and its output files, the exact bytes.
//   - configuration (config.go, provider.go): provider_config keys and
//     SAGE_OPENSANDBOX_* variables, and remote.Register("opensandbox").
//
// One sandbox serves one thread id: it carries the metadata label
// sage.thread=<id>, so another process finds it again with a filtered
// list instead of creating a second one.
//
// The API: importing the package registers the provider (ProviderName);
// its configuration is Config, read by ConfigFrom from provider_config
// (the Key* names, Default* values) and the environment; Open gives the
// Sandbox of a thread and Driver its driver.Driver; LifecycleClient and
// ExecdClient (NewLifecycleClient, NewExecdClient) are the wire clients,
// which cmd/sage's tests also drive, finding sandboxes by LabelThread.
// execd's event stream (eventReader), command states and code contexts
// are the package's own.
//
// Remote errors are *APIError values; 404 matches fs.ErrNotExist, 401
// and 403 match fs.ErrPermission, 409 matches fs.ErrExist.
package opensandbox
