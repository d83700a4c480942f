package otelsage_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

// tokenMetrics collects every int64 metric by name: the sum of each
// counter or histogram, and the gen_ai.token.* attributes seen.
func tokenMetrics(t *testing.T, f *fixture) (sums map[string]int64, attrs map[string][]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	sums, attrs = map[string]int64{}, map[string][]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sums[m.Name] += dp.Value
					if v, ok := dp.Attributes.Value(sageotel.AttrTokenModality); ok {
						attrs[m.Name] = append(attrs[m.Name], "modality="+v.AsString())
					}
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					sums[m.Name] += dp.Sum
					if v, ok := dp.Attributes.Value(sageotel.AttrTokenType); ok {
						attrs[m.Name] = append(attrs[m.Name], "type="+v.AsString())
					}
				}
			}
		}
	}
	return sums, attrs
}

// TestSemconvOptIn: by default the pinned release's token histogram is
// recorded; OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (in a
// list, any case) records the development conventions' counters and
// per-operation histograms instead, never both.
func TestSemconvOptIn(t *testing.T) {
	const old = "gen_ai.client.token.usage"
	for _, tc := range []struct {
		env    string
		latest bool
	}{
		{"", false},
		{"http", false},
		{"http, GEN_AI_LATEST_EXPERIMENTAL", true},
		{"gen_ai_latest_experimental", true},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(sageotel.SemconvOptInEnv, tc.env)
			assert.Equal(t, tc.latest, sageotel.LatestExperimentalFromEnv())
			f := newFixture(t, nil)
			session(f.m, "s") // 100 input (64 cached), 20 output (5 reasoning)
			sums, attrs := tokenMetrics(t, f)
			if !tc.latest {
				assert.Equal(t, int64(120), sums[old])
				assert.ElementsMatch(t, []string{"type=input", "type=output"}, attrs[old])
				assert.NotContains(t, sums, sageotel.MetricUsageInputTokens)
				return
			}
			assert.NotContains(t, sums, old)
			assert.Equal(t, map[string]int64{
				sageotel.MetricUsageInputTokens:      100,
				sageotel.MetricUsageOutputTokens:     20,
				sageotel.MetricUsageCacheReadTokens:  64,
				sageotel.MetricUsageCacheWriteTokens: 0,
				sageotel.MetricUsageReasoningTokens:  5,
				sageotel.MetricOperationInputTokens:  100,
				sageotel.MetricOperationOutputTokens: 20,
				sageotel.MetricInvokeAgentInference:  1,
				sageotel.MetricInvokeAgentToolCalls:  2,
			}, sums)
			assert.Equal(t, []string{"modality=unknown"}, attrs[sageotel.MetricUsageInputTokens])
		})
	}
}

// TestSemconvOptInFailedCall: in the development conventions a failed
// call counts (0 tokens, modality unknown) but adds no histogram point;
// the release records nothing for it. The option overrides the env.
func TestSemconvOptInFailedCall(t *testing.T) {
	t.Setenv(sageotel.SemconvOptInEnv, "")
	for _, latest := range []bool{false, true} {
		f := newFixture(t, nil, sageotel.HandlerOptions{LatestExperimental: new(latest)})
		ctx := f.m.LLMStart(context.Background(), observability.LLMRequest{Model: "m"})
		f.m.LLMError(ctx, errors.New("boom"))
		sums, _ := tokenMetrics(t, f)
		if !latest {
			assert.Empty(t, sums)
			continue
		}
		assert.Equal(t, map[string]int64{
			sageotel.MetricUsageInputTokens: 0, sageotel.MetricUsageOutputTokens: 0,
			sageotel.MetricUsageCacheReadTokens: 0, sageotel.MetricUsageCacheWriteTokens: 0,
			sageotel.MetricUsageReasoningTokens: 0,
		}, sums)
	}
}

// scenario is a workflow of two agents: the planner makes a streamed chat
// call (usage with cache reads and writes, chunk intervals), a tool call, a
// failed chat call and an embeddings call; the writer does nothing.
func scenario(m *observability.Manager) {
	cctx := m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "s", Name: "research"})
	actx := m.AgentStart(cctx, observability.AgentInfo{Name: "planner", Provider: "openai", Model: "gpt-4o"})
	lctx := m.LLMStart(actx, observability.LLMRequest{Model: "gpt-4o", Provider: "openai", Stream: true,
		ServerAddress: "api.openai.com", ServerPort: 443})
	m.LLMEnd(lctx, observability.LLMResponse{Model: "gpt-4o-2024", FinishReasons: []string{"stop"},
		Usage: observability.Usage{InputTokens: 100, OutputTokens: 20, CacheReadInputTokens: 40,
			CacheCreationInputTokens: 10, ReasoningTokens: 5},
		TimeToFirstChunk: 200 * time.Millisecond, ChunkIntervals: []time.Duration{10 * time.Millisecond, 30 * time.Millisecond}})
	tctx := m.ToolStart(actx, observability.ToolCall{Name: "shell", CallID: "c1"})
	m.ToolEnd(tctx, observability.ToolResult{})
	lctx = m.LLMStart(actx, observability.LLMRequest{Model: "gpt-4o", Provider: "openai"})
	m.LLMError(lctx, errors.New("upstream closed"))
	ectx := m.LLMStart(actx, observability.LLMRequest{Operation: observability.OpEmbeddings, Model: "embed", Provider: "openai"})
	m.LLMEnd(ectx, observability.LLMResponse{Usage: observability.Usage{InputTokens: 9}})
	m.AgentEnd(actx, observability.AgentResult{})
	wctx := m.AgentStart(cctx, observability.AgentInfo{Name: "writer"})
	m.AgentEnd(wctx, observability.AgentResult{})
	m.ChainEnd(cctx, observability.ChainResult{})
}

// metricIndex is every metric collected: name -> its data points'
// attribute sets and counts (histograms) or values (sums), and bounds.
type metricPoint struct {
	attrs  map[string]string
	count  uint64
	sum    float64
	bounds []float64
}

func collectMetrics(t *testing.T, f *fixture) map[string][]metricPoint {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	out := map[string][]metricPoint{}
	amap := func(s attribute.Set) map[string]string {
		m := map[string]string{}
		for _, kv := range s.ToSlice() {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out[m.Name] = append(out[m.Name], metricPoint{amap(dp.Attributes), dp.Count, dp.Sum, dp.Bounds})
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					out[m.Name] = append(out[m.Name], metricPoint{amap(dp.Attributes), dp.Count, float64(dp.Sum), dp.Bounds})
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out[m.Name] = append(out[m.Name], metricPoint{attrs: amap(dp.Attributes), sum: float64(dp.Value)})
				}
			}
		}
	}
	return out
}

// TestLatestExperimentalIsComplete: under gen_ai_latest_experimental the
// handler emits the development conventions (open-telemetry/
// semantic-conventions-genai, as of its client-inference document linking
// semantic conventions v1.44.0, with PRs #126, #201, #321, #322, #336 and
// the #530 clarification), and none of the release's instruments. Each
// check is one of the changes; the old code did 7 of them.
func TestLatestExperimentalIsComplete(t *testing.T) {
	t.Setenv(sageotel.SemconvOptInEnv, sageotel.LatestExperimental)
	f := newFixture(t, nil)
	scenario(f.m)
	ms := collectMetrics(t, f)
	n := byName(f.rec.Ended())
	has := func(name string) bool { _, ok := ms[name]; return ok }

	checks := map[string]func() bool{
		"1 chat duration on gen_ai.client.inference.duration": func() bool {
			p := ms[sageotel.MetricInferenceDuration]
			return len(p) == 2 && p[0].attrs["gen_ai.operation.name"] == "chat"
		},
		"2 time to first chunk on gen_ai.client.inference.time_to_first_chunk": func() bool {
			p := ms[sageotel.MetricInferenceTTFC]
			return len(p) == 1 && p[0].count == 1
		},
		"3 time per output chunk on gen_ai.client.inference.time_per_output_chunk": func() bool {
			p := ms[sageotel.MetricInferenceTPOC]
			return len(p) == 1 && p[0].count == 2
		},
		"4 token counters gen_ai.client.inference.usage.* by modality": func() bool {
			p := ms[sageotel.MetricUsageInputTokens]
			return len(p) > 0 && p[0].attrs["gen_ai.token.modality"] == "unknown"
		},
		"5 cache_write counter": func() bool {
			var sum float64
			for _, p := range ms[sageotel.MetricUsageCacheWriteTokens] {
				sum += p.sum
			}
			return sum == 10
		},
		"6 per-operation token histograms for successful calls only": func() bool {
			p := ms[sageotel.MetricOperationInputTokens]
			return len(p) == 1 && p[0].count == 1 && p[0].sum == 100
		},
		"7 a failed call counts in the usage counters (0), with its error.type": func() bool {
			for _, p := range ms[sageotel.MetricUsageInputTokens] {
				if p.attrs["error.type"] != "" {
					return p.sum == 0
				}
			}
			return false
		},
		"8 embeddings on gen_ai.client.embeddings.duration": func() bool {
			return len(ms[sageotel.MetricEmbeddingsDuration]) == 1
		},
		"9 embeddings tokens on gen_ai.client.embeddings.operation.input_tokens": func() bool {
			p := ms[sageotel.MetricEmbeddingsInput]
			return len(p) == 1 && p[0].sum == 9
		},
		"10 no gen_ai.client.token.usage": func() bool { return !has(sageotel.MetricTokenUsage) },
		"11 no gen_ai.client.operation.duration (nor its chunk timings)": func() bool {
			return !has(sageotel.MetricOperationDuration) && !has(sageotel.MetricTimeToFirstChunk) && !has(sageotel.MetricTimePerOutputChunk)
		},
		"12 gen_ai.invoke_agent.duration per agent, with its buckets": func() bool {
			p := ms[sageotel.MetricInvokeAgentDuration]
			return len(p) == 2 && p[0].bounds[len(p[0].bounds)-1] == 409.6
		},
		"13 gen_ai.execute_tool.duration with the tool's name and no operation name": func() bool {
			p := ms[sageotel.MetricExecuteToolDuration]
			_, op := p[0].attrs["gen_ai.operation.name"]
			return len(p) == 1 && p[0].attrs["gen_ai.tool.name"] == "shell" && !op && p[0].attrs["gen_ai.agent.name"] == "planner"
		},
		"14 gen_ai.workflow.duration with the workflow's name": func() bool {
			p := ms[sageotel.MetricWorkflowDuration]
			return len(p) == 1 && p[0].attrs["gen_ai.workflow.name"] == "research" && p[0].bounds[len(p[0].bounds)-1] == 7200
		},
		"15 gen_ai.invoke_agent.inference_calls and tool_calls": func() bool {
			for _, p := range ms[sageotel.MetricInvokeAgentInference] {
				if p.attrs["gen_ai.agent.name"] == "planner" && p.sum == 2 {
					for _, q := range ms[sageotel.MetricInvokeAgentToolCalls] {
						if q.attrs["gen_ai.agent.name"] == "planner" && q.sum == 1 {
							return true
						}
					}
				}
			}
			return false
		},
		"16 gen_ai.usage.cache_write.input_tokens on the chat and agent spans": func() bool {
			chat := attrs(n["chat gpt-4o"][0])
			if chat["gen_ai.usage.cache_write.input_tokens"].AsInt64() != 10 {
				chat = attrs(n["chat gpt-4o"][1])
			}
			_, old := chat["gen_ai.usage.cache_creation.input_tokens"]
			return chat["gen_ai.usage.cache_write.input_tokens"].AsInt64() == 10 && !old &&
				attrs(n["invoke_agent planner"][0])["gen_ai.usage.cache_write.input_tokens"].AsInt64() == 10
		},
		"17 invoke_agent has no gen_ai.provider.name, its model from creation": func() bool {
			for _, s := range f.rec.Started() {
				if s.Name() == "invoke_agent planner" {
					a := attrs(n["invoke_agent planner"][0])
					_, p := a["gen_ai.provider.name"]
					return !p && a["gen_ai.request.model"].AsString() == "gpt-4o"
				}
			}
			return false
		},
		"18 execute_tool carries the calling agent's name": func() bool {
			return attrs(n["execute_tool shell"][0])["gen_ai.agent.name"].AsString() == "planner"
		},
		"19 a failed chat reports finish reason error": func() bool {
			for _, s := range n["chat gpt-4o"] {
				if s.Status().Code == codes.Error {
					return slices.Equal(attrs(s)["gen_ai.response.finish_reasons"].AsStringSlice(), []string{"error"})
				}
			}
			return false
		},
		"20 schema URL of semantic conventions 1.44.0 on spans and metrics": func() bool {
			var rm metricdata.ResourceMetrics
			_ = f.reader.Collect(context.Background(), &rm)
			return f.rec.Ended()[0].InstrumentationScope().SchemaURL == sageotel.LatestSchemaURL &&
				len(rm.ScopeMetrics) > 0 && rm.ScopeMetrics[0].Scope.SchemaURL == sageotel.LatestSchemaURL
		},
	}
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	failed := 0
	for _, name := range names {
		ok := func() (ok bool) {
			defer func() {
				if recover() != nil {
					ok = false
				}
			}()
			return checks[name]()
		}()
		if !ok {
			failed++
			t.Errorf("missing: %s", name)
		}
	}
	t.Logf("%d of %d changes of the development conventions", len(checks)-failed, len(checks))

	// The agent's model is on its span from the start (sampling).
	for _, s := range f.rec.Started() {
		if s.Name() == "invoke_agent planner" {
			assert.Contains(t, s.Attributes(), attribute.String("gen_ai.request.model", "gpt-4o"))
		}
	}
}

// TestReleaseConventionsByDefault: without the opt-in the same scenario
// is the release's: every operation on gen_ai.client.operation.duration
// with gen_ai.provider.name (Required), chunk timings there, the token
// histogram, cache_creation on spans, provider.name on invoke_agent, the
// 1.41.0 schema.
func TestReleaseConventionsByDefault(t *testing.T) {
	t.Setenv(sageotel.SemconvOptInEnv, "")
	f := newFixture(t, nil)
	scenario(f.m)
	ms := collectMetrics(t, f)
	ops := map[string]int{}
	for _, p := range ms[sageotel.MetricOperationDuration] {
		ops[p.attrs["gen_ai.operation.name"]]++
		assert.Equal(t, "openai", p.attrs["gen_ai.provider.name"], "%v", p.attrs)
	}
	assert.Equal(t, map[string]int{"chat": 2, "embeddings": 1, "execute_tool": 1, "invoke_agent": 2, "invoke_workflow": 1}, ops)
	require.Len(t, ms[sageotel.MetricTimePerOutputChunk], 1)
	assert.EqualValues(t, 2, ms[sageotel.MetricTimePerOutputChunk][0].count, "one point per chunk after the first")
	assert.InDelta(t, 0.04, ms[sageotel.MetricTimePerOutputChunk][0].sum, 1e-9)
	assert.Contains(t, ms, sageotel.MetricTokenUsage)
	for _, name := range []string{sageotel.MetricInferenceDuration, sageotel.MetricInvokeAgentDuration,
		sageotel.MetricExecuteToolDuration, sageotel.MetricWorkflowDuration, sageotel.MetricUsageInputTokens} {
		assert.NotContains(t, ms, name)
	}
	n := byName(f.rec.Ended())
	var chat sdktrace.ReadOnlySpan
	for _, s := range n["chat gpt-4o"] {
		if s.Status().Code != codes.Error {
			chat = s
		}
	}
	assert.EqualValues(t, 10, attrs(chat)["gen_ai.usage.cache_creation.input_tokens"].AsInt64())
	assert.Equal(t, "openai", attrs(n["invoke_agent planner"][0])["gen_ai.provider.name"].AsString())
	assert.Equal(t, sageotel.SchemaURL, chat.InstrumentationScope().SchemaURL)
}
