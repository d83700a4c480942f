package otelsage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

type fixture struct {
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	m      *observability.Manager
	logs   *testenv.Buffer
}

// newFixture records what a handler made with opts (its providers are the
// fixture's) exports.
func newFixture(t *testing.T, extra []observability.Handler, opts ...sageotel.HandlerOptions) *fixture {
	t.Helper()
	f := &fixture{rec: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), logs: &testenv.Buffer{}}
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.rec))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	var o sageotel.HandlerOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	o.TracerProvider, o.MeterProvider = f.tp, mp
	h, err := sageotel.NewHandler(o)
	require.NoError(t, err)
	f.m = observability.New(observability.Options{Logger: slog.New(slog.NewTextHandler(f.logs, nil))})
	f.m.Register(extra...)
	f.m.Register(h)
	return f
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func byName(spans []sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		out[s.Name()] = append(out[s.Name()], s)
	}
	return out
}

// session runs one chain -> agent -> (llm, tool ok, tool error).
func session(m *observability.Manager, sess string) {
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{SessionID: sess, Name: "turn",
		Inputs: []observability.Message{{Role: "user", Content: "secret question"}}})
	actx := m.AgentStart(ctx, observability.AgentInfo{Name: "coder", Step: "act"})
	lctx := m.LLMStart(actx, observability.LLMRequest{Model: "gpt-4o", ModelType: observability.ModelFast,
		ServerAddress: "127.0.0.1", ServerPort: 8080, Stream: true,
		Messages: []observability.Message{{Role: "user", Content: "secret question"}}})
	m.LLMEnd(lctx, observability.LLMResponse{ID: "resp-1", Model: "gpt-4o-2024", FinishReasons: []string{"tool_calls"},
		Usage:            observability.Usage{InputTokens: 100, OutputTokens: 20, CacheReadInputTokens: 64, ReasoningTokens: 5},
		TimeToFirstChunk: 250 * time.Millisecond,
		Messages:         []observability.Message{{Role: "assistant", Content: "secret answer"}}})
	tctx := m.ToolStart(actx, observability.ToolCall{Name: "shell", CallID: "call-1", Arguments: `{"cmd":"ls secret"}`})
	m.ToolEnd(tctx, observability.ToolResult{Result: "secret output"})
	t2 := m.ToolStart(actx, observability.ToolCall{Name: "shell", CallID: "call-2", Arguments: `{"cmd":"false"}`})
	m.ToolError(t2, fmt.Errorf("tool shell: %w", context.DeadlineExceeded))
	mctx := m.MessageStart(actx, observability.Message{Role: "assistant"})
	m.MessageEnd(mctx, observability.Message{Role: "assistant", Content: "secret final"})
	m.AgentEnd(actx, observability.AgentResult{})
	m.ChainEnd(ctx, observability.ChainResult{})
}

func TestSpansFollowGenAIConventions(t *testing.T) {
	t.Setenv(sageotel.CaptureContentEnv, "")
	f := newFixture(t, nil)
	session(f.m, "sess-42")
	spans := f.rec.Ended()
	require.Len(t, spans, 5)
	require.Empty(t, f.rec.Started()[len(spans):])
	n := byName(spans)

	chain := n["turn"][0] // one agent and nothing else: no workflow, a plain span
	agent := n["invoke_agent coder"][0]
	llm := n["chat gpt-4o"][0]
	tools := n["execute_tool shell"]
	require.Len(t, tools, 2)

	assert.False(t, chain.Parent().IsValid())
	assert.Equal(t, chain.SpanContext().SpanID(), agent.Parent().SpanID())
	for _, s := range []sdktrace.ReadOnlySpan{llm, tools[0], tools[1]} {
		assert.Equal(t, agent.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		assert.Equal(t, chain.SpanContext().TraceID(), s.SpanContext().TraceID())
	}
	for _, s := range spans {
		if s != chain {
			assert.Equal(t, "sess-42", attrs(s)["gen_ai.conversation.id"].AsString(), s.Name())
		}
	}

	assert.Equal(t, trace.SpanKindInternal, chain.SpanKind())
	for k := range attrs(chain) {
		assert.False(t, strings.HasPrefix(string(k), "gen_ai."), "the chain is no GenAI operation: %s", k)
	}
	assert.Equal(t, "sess-42", attrs(chain)["sage.session.id"].AsString())
	assert.Equal(t, "invoke_agent", attrs(agent)["gen_ai.operation.name"].AsString())
	assert.Equal(t, "coder", attrs(agent)["gen_ai.agent.name"].AsString())

	la := attrs(llm)
	assert.Equal(t, trace.SpanKindClient, llm.SpanKind())
	assert.Equal(t, "chat", la["gen_ai.operation.name"].AsString())
	assert.Equal(t, "openai", la["gen_ai.provider.name"].AsString())
	assert.Equal(t, "gpt-4o", la["gen_ai.request.model"].AsString())
	assert.Equal(t, "gpt-4o-2024", la["gen_ai.response.model"].AsString())
	assert.Equal(t, []string{"tool_calls"}, la["gen_ai.response.finish_reasons"].AsStringSlice())
	assert.EqualValues(t, 100, la["gen_ai.usage.input_tokens"].AsInt64())
	assert.EqualValues(t, 20, la["gen_ai.usage.output_tokens"].AsInt64())
	assert.EqualValues(t, 64, la["gen_ai.usage.cache_read.input_tokens"].AsInt64())
	assert.EqualValues(t, 5, la["gen_ai.usage.reasoning.output_tokens"].AsInt64())
	assert.InDelta(t, 0.25, la["gen_ai.response.time_to_first_chunk"].AsFloat64(), 1e-9)
	assert.Equal(t, "127.0.0.1", la["server.address"].AsString())
	assert.EqualValues(t, 8080, la["server.port"].AsInt64())
	assert.Equal(t, "fast", la["sage.llm.model_type"].AsString())
	_, deprecated := la["gen_ai.system"]
	assert.False(t, deprecated)

	ok, bad := tools[0], tools[1]
	if attrs(ok)["gen_ai.tool.call.id"].AsString() != "call-1" {
		ok, bad = bad, ok
	}
	assert.Equal(t, "execute_tool", attrs(ok)["gen_ai.operation.name"].AsString())
	assert.Equal(t, "shell", attrs(ok)["gen_ai.tool.name"].AsString())
	assert.Equal(t, codes.Unset, ok.Status().Code)
	assert.Equal(t, codes.Error, bad.Status().Code)
	assert.Equal(t, "timeout", attrs(bad)["error.type"].AsString())
	require.Len(t, bad.Events(), 1)
	assert.Equal(t, "exception", bad.Events()[0].Name)

	// No nonstandard gen_ai.message events; the agent span carries the
	// model, provider and token totals of the calls made under it.
	assert.Empty(t, agent.Events())
	aa := attrs(agent)
	assert.Equal(t, "openai", aa["gen_ai.provider.name"].AsString())
	assert.Equal(t, "gpt-4o", aa["gen_ai.request.model"].AsString())
	assert.Equal(t, "gpt-4o-2024", aa["gen_ai.response.model"].AsString())
	assert.EqualValues(t, 100, aa["gen_ai.usage.input_tokens"].AsInt64())
	assert.EqualValues(t, 20, aa["gen_ai.usage.output_tokens"].AsInt64())
	assert.EqualValues(t, 64, aa["gen_ai.usage.cache_read.input_tokens"].AsInt64())
	assert.Equal(t, []string{"tool_calls"}, aa["gen_ai.response.finish_reasons"].AsStringSlice(), "the last call's")

	// Content capture is off by default: no content anywhere.
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			assert.NotContains(t, kv.Value.Emit(), "secret", "%s %s", s.Name(), kv.Key)
		}
		for _, e := range s.Events() {
			for _, kv := range e.Attributes {
				if kv.Key != "exception.stacktrace" {
					assert.NotContains(t, kv.Value.Emit(), "secret", "%s event %s", s.Name(), kv.Key)
				}
			}
		}
	}

	// Metrics.
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, mm := range sm.Metrics {
			got[mm.Name] = mm.Data
		}
	}
	dur, ok2 := got["gen_ai.client.operation.duration"].(metricdata.Histogram[float64])
	require.True(t, ok2)
	ops := map[string]uint64{}
	for _, dp := range dur.DataPoints {
		op, _ := dp.Attributes.Value("gen_ai.operation.name")
		et, _ := dp.Attributes.Value("error.type")
		ops[op.AsString()+"/"+et.AsString()] += dp.Count
		p, _ := dp.Attributes.Value("gen_ai.provider.name")
		assert.Equal(t, "openai", p.AsString(), "gen_ai.provider.name is Required on %s", op.AsString())
	}
	assert.Equal(t, map[string]uint64{"chat/": 1, "execute_tool/": 1, "execute_tool/timeout": 1,
		"invoke_agent/": 1}, ops)
	ttfc, ok2 := got["gen_ai.client.operation.time_to_first_chunk"].(metricdata.Histogram[float64])
	require.True(t, ok2)
	require.Len(t, ttfc.DataPoints, 1)
	assert.InDelta(t, 0.25, ttfc.DataPoints[0].Sum, 1e-9)
	tok, ok2 := got["gen_ai.client.token.usage"].(metricdata.Histogram[int64])
	require.True(t, ok2)
	sums := map[string]int64{}
	for _, dp := range tok.DataPoints {
		v, _ := dp.Attributes.Value("gen_ai.token.type")
		sums[v.AsString()] += dp.Sum
	}
	assert.Equal(t, map[string]int64{"input": 100, "output": 20}, sums)
	hit, ok2 := got[sageotel.MetricPromptCacheHitRatio].(metricdata.Histogram[float64])
	require.True(t, ok2)
	require.Len(t, hit.DataPoints, 1)
	assert.EqualValues(t, 1, hit.DataPoints[0].Count)
	assert.InDelta(t, 0.64, hit.DataPoints[0].Sum, 1e-9) // 64 of 100 input tokens
}

func TestContentCapture(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		t.Setenv(sageotel.CaptureContentEnv, "true")
		f := newFixture(t, nil)
		session(f.m, "s")
		n := byName(f.rec.Ended())
		la := attrs(n["chat gpt-4o"][0])
		assert.Contains(t, la["gen_ai.input.messages"].AsString(), `"content":"secret question"`)
		assert.Contains(t, la["gen_ai.output.messages"].AsString(), "secret answer")
		var args []string
		for _, s := range n["execute_tool shell"] {
			args = append(args, attrs(s)["gen_ai.tool.call.arguments"].AsString())
		}
		assert.Contains(t, args, `{"cmd":"ls secret"}`)
	})
	t.Run("option-truncates", func(t *testing.T) {
		t.Setenv(sageotel.CaptureContentEnv, "")
		f := newFixture(t, nil, sageotel.HandlerOptions{CaptureContent: new(true), MaxContentLength: 8})
		ctx := f.m.ToolStart(context.Background(), observability.ToolCall{Name: "py", Arguments: strings.Repeat("é", 10)})
		f.m.ToolEnd(ctx, observability.ToolResult{Result: strings.Repeat("x", 100)})
		s := f.rec.Ended()[0]
		a := attrs(s)
		assert.Equal(t, "éééé…[truncated 12 bytes]", a["gen_ai.tool.call.arguments"].AsString())
		assert.Equal(t, "xxxxxxxx…[truncated 92 bytes]", a["gen_ai.tool.call.result"].AsString())
	})
	t.Run("option-off-beats-env", func(t *testing.T) {
		t.Setenv(sageotel.CaptureContentEnv, "true")
		f := newFixture(t, nil, sageotel.HandlerOptions{CaptureContent: new(false)})
		ctx := f.m.ToolStart(context.Background(), observability.ToolCall{Name: "py", Arguments: "secret"})
		f.m.ToolEnd(ctx, observability.ToolResult{Result: "secret"})
		_, has := attrs(f.rec.Ended()[0])["gen_ai.tool.call.arguments"]
		assert.False(t, has)
	})
}

// TestConcurrentChains: 100 goroutines, each its own chain, never cross.
func TestConcurrentChains(t *testing.T) {
	f := newFixture(t, nil)
	const n = 100
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session(f.m, fmt.Sprintf("sess-%03d", i))
		}()
	}
	wg.Wait()
	spans := f.rec.Ended()
	require.Len(t, spans, 5*n)
	require.Len(t, f.rec.Started(), 5*n)

	bySpan := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	traces := map[trace.TraceID]map[string]int{}
	for _, s := range spans {
		bySpan[s.SpanContext().SpanID()] = s
	}
	session := func(s sdktrace.ReadOnlySpan) string {
		if v, ok := attrs(s)["gen_ai.conversation.id"]; ok {
			return v.AsString()
		}
		return attrs(s)["sage.session.id"].AsString()
	}
	for _, s := range spans {
		sess := session(s)
		tid := s.SpanContext().TraceID()
		if traces[tid] == nil {
			traces[tid] = map[string]int{}
		}
		traces[tid][sess]++
		if s.Parent().IsValid() {
			p, ok := bySpan[s.Parent().SpanID()]
			require.True(t, ok, "parent of %s is in the set", s.Name())
			assert.Equal(t, sess, session(p), "child and parent share a session")
			assert.Equal(t, tid, p.SpanContext().TraceID())
			switch {
			case strings.HasPrefix(s.Name(), "invoke_agent"):
				assert.Equal(t, "turn", p.Name())
			default:
				assert.True(t, strings.HasPrefix(p.Name(), "invoke_agent"), "%s under %s", s.Name(), p.Name())
			}
		} else {
			assert.Equal(t, "turn", s.Name())
		}
	}
	require.Len(t, traces, n, "one trace per chain")
	for tid, sessions := range traces {
		assert.Len(t, sessions, 1, "trace %s has one session", tid)
	}
}

type panicky struct{ observability.Base }

func (panicky) LLMStart(context.Context, observability.LLMRequest) (context.Context, error) {
	panic("handler bug")
}
func (panicky) LLMEnd(context.Context, observability.LLMResponse) error { panic("handler bug at end") }
func (panicky) ChainError(context.Context, error) error                 { panic(errors.New("in error path")) }

func TestPanickingHandlerDoesNotBreakOTel(t *testing.T) {
	f := newFixture(t, []observability.Handler{panicky{}})
	for range 5 {
		ctx := f.m.ChainStart(context.Background(), observability.ChainInfo{Name: "c"})
		lctx := f.m.LLMStart(ctx, observability.LLMRequest{Model: "m"})
		f.m.LLMEnd(lctx, observability.LLMResponse{Usage: observability.Usage{InputTokens: 1}})
		f.m.ChainError(ctx, errors.New("fail"))
	}
	spans := f.rec.Ended()
	require.Len(t, spans, 10)
	assert.Len(t, f.rec.Started(), 10)
	n := byName(spans)
	for _, s := range n["chat m"] {
		assert.EqualValues(t, 1, attrs(s)["gen_ai.usage.input_tokens"].AsInt64())
	}
	require.Len(t, n["c"], 5)
	for _, s := range n["c"] {
		assert.Equal(t, codes.Error, s.Status().Code)
	}
	logs := f.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "handler bug at end"), logs)
	assert.Equal(t, 1, strings.Count(logs, `panic="handler bug"`), logs)
	assert.Equal(t, 1, strings.Count(logs, "in error path"), logs)
}

func TestErrorPathsLeaveNoOpenSpans(t *testing.T) {
	f := newFixture(t, nil)
	ctx := f.m.ChainStart(context.Background(), observability.ChainInfo{Name: "c"})
	actx := f.m.AgentStart(ctx, observability.AgentInfo{Name: "a"})
	tctx := f.m.ToolStart(actx, observability.ToolCall{Name: "t"})
	_ = f.m.LLMStart(tctx, observability.LLMRequest{Model: "m"})
	// Something panicked in the agent; only the chain's deferred error runs.
	f.m.ChainError(ctx, errors.New("agent crashed"))
	assert.Len(t, f.rec.Ended(), len(f.rec.Started()))
	assert.Len(t, f.rec.Ended(), 4)
	for _, s := range f.rec.Ended() {
		assert.Equal(t, codes.Error, s.Status().Code, s.Name())
	}
	n := byName(f.rec.Ended())
	assert.Equal(t, "parent_ended", attrs(n["chat m"][0])["error.type"].AsString())
	// Children end before their parents.
	assert.False(t, n["chat m"][0].EndTime().After(n["execute_tool t"][0].EndTime()))
	assert.False(t, n["invoke_agent a"][0].EndTime().After(n["c"][0].EndTime()))
}

func TestSandboxSpansNestUnderTool(t *testing.T) {
	f := newFixture(t, nil)
	ctx := f.m.ToolStart(context.Background(), observability.ToolCall{Name: "shell"})
	sctx := f.m.SandboxStart(ctx, observability.SandboxOp{Op: "exec", Mode: "passthrough", SandboxID: "sb"})
	f.m.SandboxEnd(sctx, observability.SandboxResult{Command: true, ExitCode: 3})
	rctx := f.m.SandboxStart(ctx, observability.SandboxOp{Op: "read_file", Mode: "passthrough", SandboxID: "sb", Path: "x"})
	f.m.SandboxError(rctx, errors.New("boom"))
	f.m.ToolEnd(ctx, observability.ToolResult{})
	n := byName(f.rec.Ended())
	require.Len(t, n["sandbox.exec"], 1)
	tool := n["execute_tool shell"][0].SpanContext().SpanID()
	assert.Equal(t, tool, n["sandbox.exec"][0].Parent().SpanID())
	assert.Equal(t, int64(3), attrs(n["sandbox.exec"][0])["sage.sandbox.exit_code"].AsInt64())
	assert.Equal(t, "sb", attrs(n["sandbox.exec"][0])["sage.sandbox.id"].AsString())
	assert.Equal(t, tool, n["sandbox.read_file"][0].Parent().SpanID())
	assert.Equal(t, codes.Error, n["sandbox.read_file"][0].Status().Code)
	assert.Equal(t, "x", attrs(n["sandbox.read_file"][0])["sage.sandbox.path"].AsString())

	// Control: without a traced parent no sandbox span is made.
	before := len(f.rec.Ended())
	f.m.SandboxEnd(f.m.SandboxStart(context.Background(), observability.SandboxOp{Op: "exec"}), observability.SandboxResult{})
	assert.Len(t, f.rec.Ended(), before)
}
