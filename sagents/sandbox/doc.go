// Package sandbox is how agents run model-written commands and touch
// files: one concrete [Sandbox] over the [Driver] of a mode, as *sql.DB is
// over database/sql/driver.
//
// A Sandbox is created by [New] from a [Config] whose Mode names a driver
// that registered itself with [Register]:
//
//	import (
//		"github.com/sage-go/sage/sagents/sandbox"
//		_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
//	)
//
//	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: dir})
//	res, err := sb.ExecuteCommand(ctx, "ls -la", sandbox.ExecOptions{})
//
// The Sandbox owns what every mode shares: the closed state, default
// timeouts and output limits, events to the observability Manager
// (Config.Observer), counters ([Sandbox.Stats]) and the answer
// [ErrUnsupported] for an optional capability ([BackgroundRunner],
// [HostPather], [PythonRunner], [JavaScriptRunner], [Restarter], ...) the
// driver lacks. The package also holds the pieces the host drivers share,
// so that the contracts below hold in every mode:
//
//   - [PathMapper] maps virtual sandbox paths to host paths by the longest
//     mount prefix and opens them with [os.Root], so ".." and symlinks can
//     never leave a mount: an escape is an *fs.PathError that is
//     errors.Is(err, [ErrEscape]) and errors.Is(err, fs.ErrPermission); a
//     missing file is fs.ErrNotExist.
//   - [BoundedBuffer] keeps the head and the tail of a stream, counts what it
//     dropped and never blocks the writer.
//   - [RunProcess] runs a command in its own process group, drains stdout and
//     stderr concurrently, and on timeout or cancellation sends SIGTERM then
//     SIGKILL to the whole group, returning the partial output with TimedOut.
//   - [HostFS] (the file system of the host drivers) bounds what it reads:
//     ReadFile refuses files over MaxReadFileBytes, [HostFS.Open] streams,
//     [HostFS.ReadDir] and FileTree (TreeOptions.MaxEntries) stop at an
//     entry limit and say so (TreeNode.Truncated). With Owner set,
//     everything it creates belongs to that uid and gid.
//   - [TreeNode.String] quotes names as ls does, so names made inside a
//     sandbox cannot send escape sequences to a terminal.
//
// Errors are values. Capabilities a mode lacks return an error that
// errors.Is(err, ErrUnsupported).
package sandbox
