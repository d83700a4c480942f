package otelsage_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sage-go/sage/sagents/observability"
)

// TestSandboxCommandIsNoGenAIOperation: a plain sandbox command (sage exec,
// sage python: a chain of acquire, exec, release) is a span of its own
// named after the command, holding the sandbox spans; it has no GenAI
// name or attribute and is on no GenAI metric. The old code exported it as
// "invoke_workflow sage exec" and counted it in
// gen_ai.client.operation.duration.
func TestSandboxCommandIsNoGenAIOperation(t *testing.T) {
	f := newFixture(t, nil)
	ctx := f.m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "s", Name: "sage exec"})
	for _, op := range []string{"acquire", "exec", "release"} {
		sctx := f.m.SandboxStart(ctx, observability.SandboxOp{Op: op, Mode: "local", SandboxID: "t1",
			Isolation: "bwrap", Network: "off"})
		f.m.SandboxEnd(sctx, observability.SandboxResult{Command: op == "exec", ExitCode: 0})
	}
	f.m.ChainEnd(ctx, observability.ChainResult{})

	n := byName(f.rec.Ended())
	require.Len(t, n["sage exec"], 1, "spans: %v", keys(n))
	assert.NotContains(t, n, "invoke_workflow sage exec")
	root := n["sage exec"][0]
	for k := range attrs(root) {
		assert.False(t, strings.HasPrefix(string(k), "gen_ai."), "%s", k)
	}
	for _, name := range []string{"sandbox.acquire", "sandbox.exec", "sandbox.release"} {
		require.Len(t, n[name], 1, name)
		s := n[name][0]
		assert.Equal(t, root.SpanContext().SpanID(), s.Parent().SpanID(), "%s is under the command", name)
		a := attrs(s)
		assert.Equal(t, "bwrap", a["sage.sandbox.isolation"].AsString(), name)
		assert.Equal(t, "off", a["sage.sandbox.network"].AsString(), name)
		for k := range a {
			assert.True(t, strings.HasPrefix(string(k), "sage.sandbox."), "%s: %s is not namespaced", name, k)
		}
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			assert.False(t, strings.HasPrefix(m.Name, "gen_ai."), "a sandbox command is on %s", m.Name)
		}
	}
}

// TestBackgroundCommandSpan: a background command reported when it ended
// (the sandbox's "background" operation) is a span backdated to the
// command's start, under the run that saw it end, with its exit code.
func TestBackgroundCommandSpan(t *testing.T) {
	f := newFixture(t, nil)
	tctx := f.m.ToolStart(context.Background(), observability.ToolCall{Name: "execute_shell_command"})
	start := time.Now().Add(-1500 * time.Millisecond)
	sctx := f.m.SandboxStart(tctx, observability.SandboxOp{Op: "background", Mode: "local", TaskID: "bg-1", Start: start})
	f.m.SandboxEnd(sctx, observability.SandboxResult{Command: true, ExitCode: 7, Signal: "TERM", TaskID: "bg-1"})
	f.m.ToolEnd(tctx, observability.ToolResult{})

	n := byName(f.rec.Ended())
	require.Len(t, n["sandbox.background"], 1, "spans: %v", keys(n))
	s := n["sandbox.background"][0]
	assert.Equal(t, n["execute_tool execute_shell_command"][0].SpanContext().SpanID(), s.Parent().SpanID())
	assert.True(t, s.StartTime().Equal(start), "backdated to the command's start")
	assert.GreaterOrEqual(t, s.EndTime().Sub(s.StartTime()), 1500*time.Millisecond)
	a := attrs(s)
	assert.EqualValues(t, 7, a["sage.sandbox.exit_code"].AsInt64())
	assert.Equal(t, "TERM", a["sage.sandbox.signal"].AsString())
	assert.Equal(t, "bg-1", a["sage.sandbox.task_id"].AsString())
}

// TestCheckpointSpan: the checkpoint an agent turn ended with is on its
// sandbox span, under the agent's run: id, turn and size.
func TestCheckpointSpan(t *testing.T) {
	f := newFixture(t, nil)
	actx := f.m.AgentStart(context.Background(), observability.AgentInfo{Name: "sage"})
	sctx := f.m.SandboxStart(actx, observability.SandboxOp{Op: "checkpoint", Mode: "local"})
	f.m.SandboxEnd(sctx, observability.SandboxResult{Checkpoint: &observability.CheckpointInfo{ID: "ck-1", Turn: 3, Size: 42}})
	f.m.AgentEnd(actx, observability.AgentResult{})

	n := byName(f.rec.Ended())
	require.Len(t, n["sandbox.checkpoint"], 1, "spans: %v", keys(n))
	a := attrs(n["sandbox.checkpoint"][0])
	assert.Equal(t, "ck-1", a["sage.checkpoint.id"].AsString())
	assert.EqualValues(t, 3, a["sage.checkpoint.turn"].AsInt64())
	assert.EqualValues(t, 42, a["sage.checkpoint.size"].AsInt64())
}
