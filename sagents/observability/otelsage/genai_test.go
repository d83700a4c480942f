package otelsage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got (JSON text) with testdata/name, both indented.
func golden(t *testing.T, name, got string) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Indent(&buf, []byte(got), "", "  "), got)
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), buf.String())
}

// conversation is a tool-calling exchange: the assistant answers with text
// and two tool calls (one with arguments that are not JSON), the tools
// answer, and the model finishes.
var conversation = []observability.Message{
	{Role: "system", Content: "You are terse."},
	{Role: "user", Content: "List the files, then count them."},
	{Role: "assistant", Content: "Let me look.", ToolCalls: []observability.ToolCallRef{
		{ID: "call_1", Name: "shell", Arguments: `{"cmd":"ls"}`},
		{ID: "call_2", Name: "python", Arguments: `print(len(`},
	}},
	{Role: "tool", Name: "shell", ToolCallID: "call_1", Content: "a.txt\nb.txt"},
	{Role: "tool", Name: "python", ToolCallID: "call_2", Content: "SyntaxError"},
	{Role: "assistant", ToolCalls: []observability.ToolCallRef{{ID: "call_3", Name: "shell", Arguments: `{}`}}},
	{Role: "tool", ToolCallID: "call_3", Content: ""},
}

// TestCapturedMessagesKeepToolCalls: input and output messages follow the
// conventions' message schema, tool_call parts included, and every
// tool_call_response id points at a tool_call.
func TestCapturedMessagesKeepToolCalls(t *testing.T) {
	f := newFixture(t, nil, sageotel.HandlerOptions{CaptureContent: new(true), MaxContentLength: 64})
	ctx := f.m.LLMStart(context.Background(), observability.LLMRequest{Model: "m", Messages: conversation})
	f.m.LLMEnd(ctx, observability.LLMResponse{FinishReasons: []string{"tool_calls", "length"}, Messages: []observability.Message{
		{Role: "assistant", Content: "Two files.", ToolCalls: []observability.ToolCallRef{
			{ID: "call_4", Name: "shell", Arguments: `{"cmd":"wc -l a.txt"}`}}, FinishReason: "tool_calls"},
		{Role: "assistant", Content: strings.Repeat("long ", 20), FinishReason: "length"},
		{Role: "assistant", Content: ""},
	}})
	a := attrs(f.rec.Ended()[0])
	in, out := a["gen_ai.input.messages"].AsString(), a["gen_ai.output.messages"].AsString()
	golden(t, "input_messages.json", in)
	golden(t, "output_messages.json", out)

	// Every tool_call_response answers a tool_call of an earlier message.
	var msgs []struct {
		Parts []struct{ Type, ID string }
	}
	require.NoError(t, json.Unmarshal([]byte(in), &msgs))
	calls := map[string]bool{}
	responses := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Type {
			case "tool_call":
				calls[p.ID] = true
			case "tool_call_response":
				responses++
				assert.True(t, calls[p.ID], "response %s points at a call", p.ID)
			}
		}
	}
	assert.Equal(t, 3, responses)

	// Every finish_reason is one of the message schema's values (OpenAI's
	// "tool_calls" is "tool_call" there).
	var outMsgs []struct {
		FinishReason string `json:"finish_reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &outMsgs))
	for _, m := range outMsgs {
		assert.Contains(t, []string{"stop", "length", "content_filter", "tool_call", "error"}, m.FinishReason)
	}
}

// TestAgentMessagesAreOutputs: the agent's output message says why it
// finished.
func TestAgentOutputFinishReason(t *testing.T) {
	f := newFixture(t, nil, sageotel.HandlerOptions{CaptureContent: new(true)})
	ctx := f.m.AgentStart(context.Background(), observability.AgentInfo{Name: "a",
		Inputs: []observability.Message{{Role: "user", Content: "hi"}}})
	f.m.AgentEnd(ctx, observability.AgentResult{Outputs: []observability.Message{{Role: "assistant", Content: "hello"}}})
	a := attrs(f.rec.Ended()[0])
	assert.JSONEq(t, `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, a["gen_ai.input.messages"].AsString())
	assert.JSONEq(t, `[{"role":"assistant","parts":[{"type":"text","content":"hello"}],"finish_reason":"stop"}]`,
		a["gen_ai.output.messages"].AsString())
}

func ptr[T any](v T) *T { return &v }

// TestRequestParametersAndToolDescription: the parameters that were set are
// on the chat span, those that were not are absent.
func TestRequestParametersAndToolDescription(t *testing.T) {
	f := newFixture(t, nil)
	ctx := f.m.LLMStart(context.Background(), observability.LLMRequest{Model: "m", Params: observability.RequestParams{
		Temperature: ptr(0.0), TopP: ptr(0.9), MaxTokens: 512, Stop: []string{"\n\n", "END"}, Seed: ptr(int64(42)),
		FrequencyPenalty: ptr(0.5), PresencePenalty: ptr(-0.5), ChoiceCount: 2, OutputType: "json",
	}})
	f.m.LLMEnd(ctx, observability.LLMResponse{})
	ctx = f.m.LLMStart(context.Background(), observability.LLMRequest{Model: "bare"})
	f.m.LLMEnd(ctx, observability.LLMResponse{})
	ctx = f.m.ToolStart(context.Background(), observability.ToolCall{Name: "shell", Description: "Run a shell command."})
	f.m.ToolEnd(ctx, observability.ToolResult{})

	n := byName(f.rec.Ended())
	a := attrs(n["chat m"][0])
	assert.Equal(t, 0.0, a["gen_ai.request.temperature"].AsFloat64())
	_, hasTemp := a["gen_ai.request.temperature"]
	assert.True(t, hasTemp, "a temperature of 0 that was set is reported")
	assert.Equal(t, 0.9, a["gen_ai.request.top_p"].AsFloat64())
	assert.EqualValues(t, 512, a["gen_ai.request.max_tokens"].AsInt64())
	assert.Equal(t, []string{"\n\n", "END"}, a["gen_ai.request.stop_sequences"].AsStringSlice())
	assert.EqualValues(t, 42, a["gen_ai.request.seed"].AsInt64())
	assert.Equal(t, 0.5, a["gen_ai.request.frequency_penalty"].AsFloat64())
	assert.Equal(t, -0.5, a["gen_ai.request.presence_penalty"].AsFloat64())
	assert.EqualValues(t, 2, a["gen_ai.request.choice.count"].AsInt64())
	assert.Equal(t, "json", a["gen_ai.output.type"].AsString())
	for k := range attrs(n["chat bare"][0]) {
		assert.False(t, strings.HasPrefix(string(k), "gen_ai.request.") && k != "gen_ai.request.model", "unset %s reported", k)
	}
	assert.Equal(t, "Run a shell command.", attrs(n["execute_tool shell"][0])["gen_ai.tool.description"].AsString())
}

// TestUnknownUsageIsNotZero: a response without usage reports no token
// counts, on the span, the agent and the token metric.
func TestUnknownUsageIsNotZero(t *testing.T) {
	f := newFixture(t, nil)
	actx := f.m.AgentStart(context.Background(), observability.AgentInfo{Name: "a"})
	ctx := f.m.LLMStart(actx, observability.LLMRequest{Model: "m"})
	f.m.LLMEnd(ctx, observability.LLMResponse{Model: "m-1"})
	f.m.AgentEnd(actx, observability.AgentResult{})
	for _, s := range f.rec.Ended() {
		for k := range attrs(s) {
			assert.False(t, strings.HasPrefix(string(k), "gen_ai.usage."), "%s has %s", s.Name(), k)
		}
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			assert.NotEqual(t, "gen_ai.client.token.usage", m.Name)
		}
	}
}

type rateLimited struct{}

func (rateLimited) Error() string     { return "429 Too Many Requests" }
func (rateLimited) ErrorType() string { return "rate_limited" }

// TestExceptionRecordedOnce: a failed model call fails its agent and
// workflow too; all three carry the error type, only the chat span the
// exception.
func TestExceptionRecordedOnce(t *testing.T) {
	f := newFixture(t, nil)
	cctx := f.m.ChainStart(context.Background(), observability.ChainInfo{Name: "w"})
	actx := f.m.AgentStart(cctx, observability.AgentInfo{Name: "a"})
	lctx := f.m.LLMStart(actx, observability.LLMRequest{Model: "m"})
	err := fmt.Errorf("llm: %w", rateLimited{})
	f.m.LLMError(lctx, err)
	f.m.AgentError(actx, err)
	f.m.ChainError(cctx, fmt.Errorf("workflow w: %w", err))
	// A different error on another chain is recorded again.
	c2 := f.m.ChainStart(context.Background(), observability.ChainInfo{Name: "w2"})
	f.m.ChainError(c2, errors.New("other"))

	n := byName(f.rec.Ended())
	for _, name := range []string{"chat m", "invoke_agent a", "w"} {
		s := n[name][0]
		assert.Equal(t, codes.Error, s.Status().Code, name)
		assert.Equal(t, "rate_limited", attrs(s)["error.type"].AsString(), name)
	}
	require.Len(t, n["chat m"][0].Events(), 1)
	assert.Equal(t, "exception", n["chat m"][0].Events()[0].Name)
	assert.Empty(t, n["invoke_agent a"][0].Events())
	assert.Empty(t, n["w"][0].Events())
	require.Len(t, n["w2"][0].Events(), 1)
}

func TestCaptureContentEnvValues(t *testing.T) {
	for v, want := range map[string]bool{
		"": false, "true": true, "1": true, "false": false, "garbage": false,
		"SPAN_ONLY": true, "span_and_event": true, "EVENT_ONLY": false, "NO_CONTENT": false,
	} {
		t.Setenv(sageotel.CaptureContentEnv, v)
		assert.Equal(t, want, sageotel.CaptureContentFromEnv(), "%q", v)
	}
}

func TestInstrumentationScope(t *testing.T) {
	f := newFixture(t, nil)
	ctx := f.m.LLMStart(context.Background(), observability.LLMRequest{Model: "m"})
	f.m.LLMEnd(ctx, observability.LLMResponse{Usage: observability.Usage{InputTokens: 1, OutputTokens: 1}})
	sc := f.rec.Ended()[0].InstrumentationScope()
	assert.Equal(t, sageotel.ScopeName, sc.Name)
	assert.Equal(t, sageotel.SchemaURL, sc.SchemaURL)
	assert.NotEmpty(t, sc.Version)
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	require.NotEmpty(t, rm.ScopeMetrics)
	assert.Equal(t, sageotel.SchemaURL, rm.ScopeMetrics[0].Scope.SchemaURL)
}

// TestSingleAgentWorkflowIsNotReported: a chain is an invoke_workflow span
// only when it groups GenAI operations (here two agents), backdated to its
// start. A chain that only wraps an agent of the same name is that agent;
// one that holds a single agent and sandbox work (sage agent: acquire,
// agent, release) or nothing is a plain span of its own name, with no GenAI
// name, attribute or metric (the old code reported "invoke_workflow sage
// agent" for every sage agent run, and counted it in
// gen_ai.client.operation.duration).
func TestSingleAgentWorkflowIsNotReported(t *testing.T) {
	f := newFixture(t, nil)
	cctx := f.m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "s1", Name: "solo"})
	actx := f.m.AgentStart(cctx, observability.AgentInfo{Name: "solo"})
	lctx := f.m.LLMStart(actx, observability.LLMRequest{Model: "m"})
	f.m.LLMEnd(lctx, observability.LLMResponse{})
	f.m.AgentError(actx, errors.New("boom"))
	f.m.ChainError(cctx, errors.New("boom"))

	before := time.Now()
	cctx = f.m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "s2", Name: "research"})
	time.Sleep(5 * time.Millisecond)
	for _, name := range []string{"planner", "writer"} {
		actx = f.m.AgentStart(cctx, observability.AgentInfo{Name: name})
		f.m.AgentEnd(actx, observability.AgentResult{})
	}
	f.m.ChainEnd(cctx, observability.ChainResult{})

	cctx = f.m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "s3", Name: "sage agent"})
	sctx := f.m.SandboxStart(cctx, observability.SandboxOp{Op: "acquire", Mode: "local"})
	f.m.SandboxEnd(sctx, observability.SandboxResult{})
	actx = f.m.AgentStart(cctx, observability.AgentInfo{Name: "sage"})
	f.m.AgentEnd(actx, observability.AgentResult{})
	sctx = f.m.SandboxStart(cctx, observability.SandboxOp{Op: "release", Mode: "local"})
	f.m.SandboxEnd(sctx, observability.SandboxResult{})
	f.m.ChainEnd(cctx, observability.ChainResult{})

	cctx = f.m.ChainStart(context.Background(), observability.ChainInfo{Name: "one"})
	actx = f.m.AgentStart(cctx, observability.AgentInfo{Name: "planner"})
	f.m.AgentEnd(actx, observability.AgentResult{})
	f.m.ChainEnd(cctx, observability.ChainResult{})

	cctx = f.m.ChainStart(context.Background(), observability.ChainInfo{Name: "empty"})
	f.m.ChainEnd(cctx, observability.ChainResult{})

	assert.Len(t, f.rec.Ended(), len(f.rec.Started()))
	n := byName(f.rec.Ended())
	assert.NotContains(t, n, "invoke_workflow solo")
	assert.NotContains(t, n, "solo")
	solo := n["invoke_agent solo"][0]
	assert.False(t, solo.Parent().IsValid(), "the agent is the root")
	assert.Equal(t, "s1", attrs(solo)["gen_ai.conversation.id"].AsString())
	assert.Equal(t, solo.SpanContext().SpanID(), n["chat m"][0].Parent().SpanID())

	require.Len(t, n["invoke_workflow research"], 1, "spans: %v", keys(n))
	wf := n["invoke_workflow research"][0]
	for _, name := range []string{"invoke_agent planner", "invoke_agent writer"} {
		found := false
		for _, s := range n[name] {
			found = found || s.Parent().SpanID() == wf.SpanContext().SpanID()
		}
		assert.True(t, found, "%s is under the workflow", name)
	}
	assert.False(t, wf.StartTime().Before(before))
	assert.Less(t, wf.StartTime(), n["invoke_agent writer"][0].StartTime(), "backdated to the chain's start")
	assert.Equal(t, "s2", attrs(wf)["gen_ai.conversation.id"].AsString())
	assert.Equal(t, "research", attrs(wf)["gen_ai.workflow.name"].AsString())
	assert.Equal(t, "invoke_workflow", attrs(wf)["gen_ai.operation.name"].AsString())

	for _, name := range []string{"sage agent", "one", "empty"} {
		require.Len(t, n[name], 1, "%s in %v", name, keys(n))
		s := n[name][0]
		assert.False(t, s.Parent().IsValid(), "%s is a root", name)
		for k := range attrs(s) {
			assert.False(t, strings.HasPrefix(string(k), "gen_ai."), "%s has %s", name, k)
		}
	}
	assert.Equal(t, "s3", attrs(n["sage agent"][0])["sage.session.id"].AsString())
	cli := n["sage agent"][0].SpanContext().SpanID()
	for _, name := range []string{"sandbox.acquire", "invoke_agent sage", "sandbox.release"} {
		require.Len(t, n[name], 1, name)
		assert.Equal(t, cli, n[name][0].Parent().SpanID(), "%s is under sage agent", name)
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	workflows := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == sageotel.MetricOperationDuration {
				for _, dp := range h.DataPoints {
					if op, _ := dp.Attributes.Value(sageotel.AttrOperationName); op.AsString() == "invoke_workflow" {
						name, _ := dp.Attributes.Value(sageotel.AttrWorkflowName)
						workflows[name.AsString()] += dp.Count
					}
				}
			}
		}
	}
	assert.Equal(t, map[string]uint64{"research": 1}, workflows, "only the real workflow is a GenAI operation")
}

// TestEmbeddingsSpan: an embeddings call is an "embeddings {model}" CLIENT
// span with input tokens only, and does not count as the agent's model.
func TestEmbeddingsSpan(t *testing.T) {
	f := newFixture(t, nil)
	actx := f.m.AgentStart(context.Background(), observability.AgentInfo{Name: "a"})
	ctx := f.m.LLMStart(actx, observability.LLMRequest{Operation: observability.OpEmbeddings, Model: "embed",
		Params: observability.RequestParams{Dimensions: 256}})
	f.m.LLMEnd(ctx, observability.LLMResponse{Model: "embed-v3", Usage: observability.Usage{InputTokens: 9}})
	f.m.AgentEnd(actx, observability.AgentResult{})
	n := byName(f.rec.Ended())
	s := n["embeddings embed"][0]
	a := attrs(s)
	assert.Equal(t, trace.SpanKindClient, s.SpanKind())
	assert.Equal(t, "embeddings", a["gen_ai.operation.name"].AsString())
	assert.EqualValues(t, 256, a["gen_ai.embeddings.dimension.count"].AsInt64())
	assert.EqualValues(t, 9, a["gen_ai.usage.input_tokens"].AsInt64())
	_, hasOut := a["gen_ai.usage.output_tokens"]
	assert.False(t, hasOut)
	_, agentModel := attrs(n["invoke_agent a"][0])["gen_ai.request.model"]
	assert.False(t, agentModel)

	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[int64]); ok && m.Name == "gen_ai.client.token.usage" {
				require.Len(t, h.DataPoints, 1)
				op, _ := h.DataPoints[0].Attributes.Value("gen_ai.operation.name")
				typ, _ := h.DataPoints[0].Attributes.Value("gen_ai.token.type")
				assert.Equal(t, "embeddings/input", op.AsString()+"/"+typ.AsString())
			}
		}
	}
}
