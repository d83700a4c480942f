package tools

import "context"

// ProgressFunc receives the output of a running execute_shell_command or
// await_shell as it arrives, in pieces of at most 16 KiB, while
// the call waits (an MCP server turns them into progress notifications).
type ProgressFunc func(output string)

// maxProgressBytes bounds one piece of output given to a ProgressFunc.
const maxProgressBytes = 16 << 10

type progressKey struct{}

// WithProgress returns a context whose shell tool calls report their output
// to f while they wait.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

func progressFrom(ctx context.Context) ProgressFunc {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}
