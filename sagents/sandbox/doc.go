// Package sandbox is how agents run model-written commands and touch
// files: one concrete [Sandbox] over the driver of a mode, as *sql.DB is
// over database/sql/driver. What a driver author implements and needs is
// in package [github.com/sage-go/sage/sagents/sandbox/driver].
//
// A Sandbox is created by [New] from a [Config] whose Mode names a driver
// that registered itself (driver.Register, from the provider's init):
//
//	import (
//		"github.com/sage-go/sage/sagents/sandbox"
//		_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
//	)
//
//	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: dir})
//	res, err := sb.ExecuteCommand(ctx, "ls -la", sandbox.ExecOptions{})
//
// A Config comes from code, from YAML ([ConfigFromYAML]) or from the
// SAGE_* environment ([ConfigFromEnv]); New validates it and errors name
// the bad field (*[ConfigError]).
//
// The Sandbox owns what every mode shares: the closed state, default
// timeouts and output limits, events to the observability Manager
// (Config.Observer), counters ([Sandbox.Stats]) and the answer
// [ErrUnsupported] for an optional capability (background tasks, host
// paths, Python, JavaScript, restart, checkpoints, ...) the driver lacks.
// Paths are sandbox (virtual) paths: a path that leaves the sandbox is an
// *fs.PathError that is errors.Is(err, [ErrEscape]) and
// errors.Is(err, fs.ErrPermission); a missing file is fs.ErrNotExist.
// Output is bounded (ExecOptions.OutputLimit, [DefaultOutputLimit]): the
// result keeps its head and tail and counts what it dropped.
// [TreeNode.String] quotes names as ls does, so names made inside a
// sandbox cannot send escape sequences to a terminal.
//
// # Names from package driver
//
// The values that cross between a Sandbox and its driver are defined once,
// in package driver, and named here by type aliases, for the ones a caller
// writes: the configuration (Config, LocalConfig, RemoteConfig, Isolation,
// NetworkMode, VolumeMount, Type), the options of the methods
// (ExecOptions, PythonOptions, WriteOptions, TreeOptions, CopyOptions),
// their results (CommandResult, FileInfo, TreeNode, CopyResult,
// BackgroundTask, BackgroundOutput, BackgroundState, Checkpoint,
// CheckpointID, RollbackResult) and the error types a caller unwraps
// (ConfigError, RequirementsError). The error values (ErrClosed,
// ErrUnsupported, ...) and the constants of modes, networks, isolation
// techniques and defaults are the driver's values under the same names.
// Everything else of package driver (the Driver interface, the optional
// capabilities, registration, the helpers drivers share) is for driver
// authors only.
package sandbox
