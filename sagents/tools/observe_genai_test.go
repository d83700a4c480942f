package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/tools"
)

type toolRecorder struct {
	observability.Base
	calls []observability.ToolCall
	errs  []error
}

func (r *toolRecorder) ToolStart(ctx context.Context, c observability.ToolCall) (context.Context, error) {
	r.calls = append(r.calls, c)
	return ctx, nil
}

func (r *toolRecorder) ToolError(_ context.Context, err error) error {
	r.errs = append(r.errs, err)
	return nil
}

// TestObserverSeesToolDescription: the tool start event carries the
// description the model saw, and a failure its low-cardinality code.
func TestObserverSeesToolDescription(t *testing.T) {
	h := open(t, sandbox.Passthrough)
	rec := &toolRecorder{}
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

	require.Len(t, rec.calls, 2)
	require.Equal(t, want, rec.calls[0].Description)
	require.Equal(t, "call_1", rec.calls[0].CallID)
	require.Empty(t, rec.calls[1].Description)
	require.Len(t, rec.errs, 2)
	require.Equal(t, tools.CodeUnknownTool, observability.ErrorType(rec.errs[1]))
	require.NotEqual(t, "_OTHER", observability.ErrorType(rec.errs[0]))
}
