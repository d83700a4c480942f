package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
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
