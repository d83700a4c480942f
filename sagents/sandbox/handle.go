package sandbox

import "context"

// Handle is one sandbox. Paths given to its methods are sandbox (virtual)
// paths; relative paths start at the workspace. Methods are safe for
// concurrent use.
type Handle interface {
	// Type is the sandbox mode.
	Type() Type
	// ID identifies the sandbox.
	ID() string
	// WorkspacePath is the workspace as commands inside see it.
	WorkspacePath() string
	// HostWorkspacePath is the workspace on the host, or "" when it has no
	// host directory (remote sandboxes).
	HostWorkspacePath() string
	// VolumeMounts lists the extra mounts.
	VolumeMounts() []VolumeMount

	// ExecuteCommand runs command with /bin/sh -c in the sandbox. A non-nil
	// error means the sandbox could not run it; a command that ran and
	// failed is a result with Success false.
	ExecuteCommand(ctx context.Context, command string, opts ExecOptions) (*CommandResult, error)
	// ExecutePython runs Python code in the sandbox.
	ExecutePython(ctx context.Context, code string, opts PythonOptions) (*CommandResult, error)

	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte, opts WriteOptions) error
	FileExists(ctx context.Context, path string) (bool, error)
	ListDirectory(ctx context.Context, path string) ([]FileInfo, error)
	EnsureDirectory(ctx context.Context, path string) error
	// DeleteFile removes a file, or a directory and everything in it.
	DeleteFile(ctx context.Context, path string) error
	FileTree(ctx context.Context, path string, opts TreeOptions) (*TreeNode, error)
	// CopyFromHost copies a host file or directory to a sandbox path.
	CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts CopyOptions) (CopyResult, error)

	// ToHostPath maps a sandbox path to the host path behind it.
	ToHostPath(path string) (string, error)
	// ToVirtualPath maps a host path to the sandbox path that shows it.
	ToVirtualPath(hostPath string) (string, error)

	// StartBackground starts command in the background; its stdout and
	// stderr go to a log file.
	StartBackground(ctx context.Context, command string, opts ExecOptions) (*BackgroundTask, error)
	// ReadBackgroundOutput reads at most max bytes of the task's log from
	// offset (max <= 0 means 64 KiB).
	ReadBackgroundOutput(ctx context.Context, taskID string, offset int64, max int) (BackgroundOutput, error)
	BackgroundStatus(ctx context.Context, taskID string) (BackgroundState, error)
	// KillBackground ends the task's whole process group: SIGTERM, then
	// SIGKILL after a grace period, or SIGKILL at once when force is set.
	KillBackground(ctx context.Context, taskID string, force bool) error

	// Close stops background tasks and releases resources. It is
	// idempotent.
	Close(ctx context.Context) error
}
