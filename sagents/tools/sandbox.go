package tools

import (
	"context"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Sandbox is what the tools call on a sandbox: *sandbox.Sandbox has it,
// and a test may give anything else that does.
type Sandbox interface {
	Type() sandbox.Type
	ID() string
	WorkspacePath() string

	ExecuteCommand(ctx context.Context, command string, opts sandbox.ExecOptions) (*sandbox.CommandResult, error)
	ExecutePython(ctx context.Context, code string, opts sandbox.PythonOptions) (*sandbox.CommandResult, error)

	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte, opts sandbox.WriteOptions) error
	FileExists(ctx context.Context, path string) (bool, error)
	ListDirectory(ctx context.Context, path string) ([]sandbox.FileInfo, error)
	FileTree(ctx context.Context, path string, opts sandbox.TreeOptions) (*sandbox.TreeNode, error)
	CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts sandbox.CopyOptions) (sandbox.CopyResult, error)

	StartBackground(ctx context.Context, command string, opts sandbox.ExecOptions) (*sandbox.BackgroundTask, error)
	ReadBackgroundOutput(ctx context.Context, taskID string, offset int64, max int) (sandbox.BackgroundOutput, error)
	BackgroundStatus(ctx context.Context, taskID string) (sandbox.BackgroundState, error)
	KillBackground(ctx context.Context, taskID string, force bool) error
}

var _ Sandbox = (*sandbox.Sandbox)(nil)
