package genkitsage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	genkitsage "github.com/sage-go/sage/adapters/genkit"
	"github.com/sage-go/sage/sagents/sage/sagetest"
)

// flow is what a Genkit user writes: a flow generating with the sage
// model and the sage tools (traced, or not for the control).
func flow(e *sagetest.Env, traced bool) func(context.Context, string) (string, error) {
	ctx := context.Background()
	g := genkit.Init(ctx)
	model := genkitsage.DefineModel(g, "sage/standard", e.Runtime.Client, genkitsage.ModelOptions{CacheKey: "s1"})
	tools := genkitsage.DefineTools(g, e.Runtime.Tools)
	fn := func(ctx context.Context, task string) (string, error) {
		return genkit.GenerateText(ctx, g, ai.WithModel(model), ai.WithTools(tools...), ai.WithPrompt(task))
	}
	if traced {
		fn = genkitsage.Traced(e.Runtime.Observer, "coder", fn)
	}
	return genkit.DefineFlow(g, "coder", fn).Run
}

// TestFlowDrivesSageTools: a Genkit flow, on sage's model client and
// tools in a local session sandbox, plays the replay's plan: the file is
// written, the command runs, the answer comes back, and the trace is one
// tree: Genkit's flow span (Genkit traces with the global provider, here
// the one sage's handler exports to) over the sage agent run over the
// model and tool calls.
func TestFlowDrivesSageTools(t *testing.T) {
	e := sagetest.New(t, nil)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(e.TracerProvider)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	answer, err := flow(e, true)(context.Background(), sagetest.Task)
	require.NoError(t, err)
	e.Check(t, "coder", answer)

	var agent, root sdktrace.ReadOnlySpan
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range e.Spans.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
		if s.Name() == "invoke_agent coder" {
			agent = s
		}
	}
	require.NotNil(t, agent)
	for root = agent; root.Parent().IsValid(); root = byID[root.Parent().SpanID().String()] {
		require.NotNil(t, byID[root.Parent().SpanID().String()], "the agent span's parents are recorded")
	}
	assert.Equal(t, "coder", root.Name(), "Genkit's flow span is the root of the trace")
}

// TestWithoutTracedNoAgentRun is the control of the trace check: the
// same flow without Traced has model and tool calls but no agent run
// around them.
func TestWithoutTracedNoAgentRun(t *testing.T) {
	e := sagetest.New(t, nil)
	answer, err := flow(e, false)(context.Background(), sagetest.Task)
	require.NoError(t, err)
	probs := strings.Join(e.Problems("coder", answer), "\n")
	assert.Contains(t, probs, `no agent run named "coder"`)
	assert.NotContains(t, probs, "fib.py", "the tools still did the work")
}
