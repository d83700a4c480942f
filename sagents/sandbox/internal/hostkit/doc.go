// Package hostkit is the toolkit of the drivers whose commands run as host
// processes and whose files live in host directories (local, passthrough,
// and the pieces of the remote drivers that copy host files), so that the
// contracts of package driver hold in every such mode:
//
//   - [PathMapper] maps virtual sandbox paths to host paths by the longest
//     mount prefix and opens them with [os.Root], so ".." and symlinks can
//     never leave a mount: an escape is an *fs.PathError that is
//     errors.Is(err, driver.ErrEscape) and errors.Is(err, fs.ErrPermission);
//     a missing file is fs.ErrNotExist.
//   - [HostFS] (the driver.FS of the host drivers) bounds what it reads:
//     ReadFile refuses files over [MaxReadFileBytes], [HostFS.Open]
//     streams, [HostFS.ReadDir] and [HostFS.FileTree] stop at an entry
//     limit and say so. With Owner set, everything it creates belongs to
//     that uid and gid. [WalkCopy] copies a host tree into it.
//   - [RunProcess] runs a command in its own process group, drains stdout
//     and stderr concurrently ([Output]), and on timeout or cancellation
//     sends SIGTERM then SIGKILL to the whole group, returning the partial
//     output with TimedOut.
//   - [Background] runs and tracks background tasks (driver.BackgroundRunner).
//   - [Environ] builds a command's environment from an allowlist.
//   - [LockFile] and [SweepLock]: a process's own files (an anonymous
//     sandbox's runtime directory) lie beside a lock it holds (flock);
//     a later process removes those whose holder died (kill -9).
//
// It is internal: only this module's drivers use it. A driver elsewhere
// implements package driver's interfaces with its own means.
package hostkit
