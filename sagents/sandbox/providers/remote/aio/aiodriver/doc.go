// Package aiodriver is the driver.Driver of one running AIO sandbox,
// over the aioapi client: Open asks the server for its workspace and
// returns a *Handle.
//
// Commands run through /v1/bash/exec in a shell session that no other
// call uses at the same time (a pool of "lanes"); files go through
// /v1/file/*; background tasks are async bash commands in their own
// session. Paths are confined to the sandbox's workspace (".." may not
// leave it; symlink escapes are the server's to refuse).
//
// A Handle knows nothing of orchestration: the orchestrator package wraps
// its transport to count activity and decides when to close it.
//
// Its API: Open with OpenOptions, and *Handle, a sandbox.Driver with the
// optional capabilities it has; the rest is the driver's own.
package aiodriver
