package driver

import (
	"context"
	"io"
	"io/fs"
)

// Driver is what a mode implements, as database/sql/driver is to
// database/sql: the few operations every mode has. [Sandbox] adds what all
// modes share (validation, the closed state, default timeouts and output
// limits, events, counters) and finds the optional capabilities below by
// type assertion, answering [ErrUnsupported] for the ones a driver lacks.
//
// Paths are sandbox (virtual) paths; relative paths start at the
// workspace. Methods must be safe for concurrent use. Sandbox never calls
// a driver after its Close.
type Driver interface {
	// ID identifies the sandbox.
	ID() string
	// WorkspacePath is the workspace as commands inside see it.
	WorkspacePath() string
	Execer
	FS
	// Close stops background tasks and releases resources; Sandbox calls
	// it once.
	Close(ctx context.Context) error
}

// Execer runs one command.
type Execer interface {
	// Exec runs spec.Command with /bin/sh -c. A non-nil error means the
	// command could not run; a command that ran and failed is a result
	// with Success false. Sandbox fills in spec's timeout and output limit.
	Exec(ctx context.Context, spec ExecSpec) (*CommandResult, error)
}

// ExecSpec is one command to run.
type ExecSpec struct {
	Command string
	ExecOptions
}

// FS is a driver's file system. Escapes are errors that match
// [ErrEscape] (and so fs.ErrPermission); missing files fs.ErrNotExist.
type FS interface {
	// ReadFile reads a whole regular file (bounded by the driver).
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile replaces (or with opts.Append extends) a file.
	WriteFile(ctx context.Context, path string, data []byte, opts WriteOptions) error
	// Stat describes path without following a final symlink.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ReadDir lists at most max entries (max > 0) sorted by name;
	// truncated says the directory holds more.
	ReadDir(ctx context.Context, path string, max int) (list []FileInfo, truncated bool, err error)
	// Remove removes a file, or a directory and everything in it.
	Remove(ctx context.Context, path string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(ctx context.Context, path string) error
	// Open opens a regular file for streaming reads.
	Open(ctx context.Context, path string) (io.ReadCloser, fs.FileInfo, error)
}

// Optional capabilities, found by type assertion on the Driver.
type (
	// BackgroundRunner runs commands in the background, their output
	// going to a log.
	BackgroundRunner interface {
		StartBackground(ctx context.Context, command string, opts ExecOptions) (*BackgroundTask, error)
		ReadBackgroundOutput(ctx context.Context, taskID string, offset int64, max int) (BackgroundOutput, error)
		BackgroundStatus(ctx context.Context, taskID string) (BackgroundState, error)
		KillBackground(ctx context.Context, taskID string, force bool) error
	}
	// HostPather is a driver whose files live in host directories.
	HostPather interface {
		HostWorkspacePath() string
		ToHostPath(path string) (string, error)
		ToVirtualPath(hostPath string) (string, error)
	}
	// Mounter lists the extra mounts.
	Mounter interface {
		VolumeMounts() []VolumeMount
	}
	// PythonRunner runs Python code.
	PythonRunner interface {
		ExecutePython(ctx context.Context, code string, opts PythonOptions) (*CommandResult, error)
	}
	// JavaScriptRunner runs JavaScript code.
	JavaScriptRunner interface {
		ExecuteJavaScript(ctx context.Context, code string, opts ExecOptions) (*CommandResult, error)
	}
	// Restarter restarts the sandbox's session (its processes), keeping
	// the workspace.
	Restarter interface {
		Restart(ctx context.Context) error
	}
	// TreeWalker walks a directory tree.
	TreeWalker interface {
		FileTree(ctx context.Context, path string, opts TreeOptions) (*TreeNode, error)
	}
	// HostCopier copies host files into the sandbox.
	HostCopier interface {
		CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts CopyOptions) (CopyResult, error)
	}
	// IsolationReporter says how the driver isolates commands: the
	// technique (IsolationBwrap, IsolationGvisor, IsolationSeatbelt,
	// IsolationNone, ...) and the network mode they get. The sandbox's
	// events carry both.
	IsolationReporter interface {
		Isolation() (kind string, network NetworkMode)
	}
)
