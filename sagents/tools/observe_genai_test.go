package tools_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// TestObserverSeesToolDescription: the tool start event carries the
// description the model saw, and a failure its low-cardinality code.
func TestObserverSeesToolDescription(t *testing.T) {
	h := open(t, sandbox.Passthrough)
	rec := &observabilitytest.Recorder{}
	m := manager(t, h, tools.Options{Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}})})
	var want string
	for _, d := range m.Definitions() {
		if d.Function.Name == "file_read" {
			want = d.Function.Description
		}
	}
	require.NotEmpty(t, want)
	_, err := m.Do(ctx(t), tools.Call{ID: "call_1", Name: "file_read", Arguments: json.RawMessage(`{"path":"missing.txt"}`)})
	require.Error(t, err)
	_, err = m.Do(ctx(t), tools.Call{ID: "call_2", Name: "no_such_tool"})
	require.Error(t, err)

	require.Len(t, observabilitytest.Data[observability.ToolCall](rec, "ToolStart"), 2)
	require.Equal(t, want, observabilitytest.Data[observability.ToolCall](rec, "ToolStart")[0].Description)
	require.Equal(t, "call_1", observabilitytest.Data[observability.ToolCall](rec, "ToolStart")[0].CallID)
	require.Empty(t, observabilitytest.Data[observability.ToolCall](rec, "ToolStart")[1].Description)
	require.Len(t, rec.Errs("ToolError"), 2)
	require.Equal(t, tools.CodeUnknownTool, observability.ErrorType(rec.Errs("ToolError")[1]))
	require.NotEqual(t, "_OTHER", observability.ErrorType(rec.Errs("ToolError")[0]))
}

// TestShellCommandIsTraced: execute_shell_command runs its command in the
// background and waits for it; the command itself is reported once it has
// ended, as a "background" sandbox operation under the tool call, backdated
// to its start, with its exit code (the old code reported only the
// start_background call, ~1 ms, with no exit code or duration). Control:
// start_background is still reported, with the task it created.
func TestShellCommandIsTraced(t *testing.T) {
	rec := &observabilitytest.Recorder{}
	obs := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	h, err := sandbox.New(ctx(t), sandbox.Config{Mode: sandbox.Passthrough, Workspace: sandboxtest.TempDir(t),
		RuntimeDir: sandboxtest.TempDir(t), Observer: obs})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	m := manager(t, h, tools.Options{Observer: obs})
	out, err := m.Do(ctx(t), tools.Call{ID: "c1", Name: "execute_shell_command",
		Arguments: json.RawMessage(`{"command":"sleep 0.3; exit 4"}`)})
	require.NoError(t, err, out)

	var tool, bg observability.Run
	var op observability.SandboxOp
	var res observability.SandboxResult
	var starts []string
	for _, e := range rec.Events() {
		switch {
		case e.Op == "ToolStart":
			tool = e.Run
		case e.Op == "SandboxStart":
			o := e.Data.(observability.SandboxOp)
			starts = append(starts, o.Op)
			if o.Op == "background" {
				bg, op = e.Run, o
			}
		case e.Op == "SandboxEnd" && e.Run.ID == bg.ID && bg.ID != 0:
			res = e.Data.(observability.SandboxResult)
		}
	}
	require.Contains(t, starts, "start_background", "control")
	require.NotZero(t, bg.ID, "no background command event among %v", starts)
	assert.Equal(t, tool.ID, bg.ParentID, "the command is under its tool call")
	assert.True(t, res.Command)
	assert.Equal(t, 4, res.ExitCode)
	assert.NotEmpty(t, op.TaskID)
	assert.False(t, op.Start.IsZero())
	assert.GreaterOrEqual(t, bg.Start.Sub(op.Start), 300*time.Millisecond, "backdated to the command's start")
	assert.Equal(t, "none", op.Isolation)
}
