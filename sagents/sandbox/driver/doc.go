// Package driver is what a sandbox mode implements, as database/sql/driver
// is to database/sql: package sandbox's concrete *sandbox.Sandbox calls a
// [Driver] and adds what every mode shares (validation, the closed state,
// default timeouts and output limits, events, counters, and ErrUnsupported
// for an optional capability the driver lacks).
//
// A mode is a package that implements [Driver] ([Execer] and [FS] plus
// ID, WorkspacePath and Close) and whichever optional capabilities it
// really has, found by type assertion: [BackgroundRunner], [HostPather],
// [Mounter], [PythonRunner], [JavaScriptRunner], [Restarter],
// [TreeWalker], [HostCopier], [IsolationReporter], [Checkpointer] and
// [TurnCheckpointer]; a [ProcessCheckpointer] takes part in a sandbox's
// checkpoints from outside its driver. It registers a [Factory] from init
// with [Register]; sandbox.New finds it by [Lookup].
//
// The values that cross the seam are defined here, so that this package
// never imports package sandbox (which names the user's ones by type
// aliases): [Config] and its sub-configs with [Config.Validate], the
// options and results of the operations ([ExecOptions], [CommandResult],
// [FileInfo], ...), checkpoints, and the errors a driver returns: path
// refusals are *fs.PathError values built by [NewPathError] around
// [ErrEscape], [ErrReadOnly] or [ErrBadPath] (all fs.ErrPermission); a
// missing file is fs.ErrNotExist; a bad config field a *[ConfigError].
//
// It also holds the helpers any driver needs to keep the contracts:
// [BoundedBuffer] (the head and the tail of a stream, never blocking the
// writer), [CommandTimeout], [CheckArgs] (the one-argument limit of
// Linux), [ValidEnvName], [ValidID], [NewID], and the parsers of mounts,
// egress rules, umasks and uid ranges. The toolkit the host drivers share
// (the path mapper and host file system over os.Root, process groups,
// output pipes, background tasks) is sagents/sandbox/internal/hostkit.
package driver
