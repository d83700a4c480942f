// Package sandbox defines the one interface through which agents run
// model-written commands and touch files: [Handle].
//
// A Handle is created by [New] from a [Config] whose Mode names a provider
// that registered itself with [Register], the way database/sql drivers do:
//
//	import (
//		"github.com/sage-go/sage/sagents/sandbox"
//		_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
//	)
//
//	h, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: dir})
//	res, err := h.ExecuteCommand(ctx, "ls -la", sandbox.ExecOptions{})
//
// The package also holds the pieces every provider shares, so that the
// contracts below hold in every mode:
//
//   - [PathMapper] maps virtual sandbox paths to host paths by the longest
//     mount prefix and opens them with [os.Root], so ".." and symlinks can
//     never leave a mount: an escape is an error that is
//     errors.Is(err, fs.ErrPermission); a missing file is fs.ErrNotExist.
//   - [BoundedBuffer] keeps the head and the tail of a stream, counts what it
//     dropped and never blocks the writer.
//   - [RunProcess] runs a command in its own process group, drains stdout and
//     stderr concurrently, and on timeout or cancellation sends SIGTERM then
//     SIGKILL to the whole group, returning the partial output with TimedOut.
//   - [HostFS] (the file methods of the host providers) bounds what it reads:
//     ReadFile refuses files over MaxReadFileBytes, [HostFS.OpenFile] streams,
//     [HostFS.ListDirectoryLimit] and FileTree (TreeOptions.MaxEntries) stop
//     at an entry limit and say so (TreeNode.Truncated). With Owner set,
//     everything it creates belongs to that uid and gid. [OpenFile] and
//     [ListDirectoryLimit] reach these through any Handle (wrappers
//     included), with a fallback for providers without them.
//   - [TreeNode.String] quotes names as ls does, so names made inside a
//     sandbox cannot send escape sequences to a terminal.
//
// Errors are values. Capabilities a mode lacks return an error that
// errors.Is(err, ErrUnsupported).
package sandbox
