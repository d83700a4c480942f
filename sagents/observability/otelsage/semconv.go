package otelsage

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sage-go/sage/sagents/observability"
)

// SemconvOptInEnv is the environment variable the GenAI conventions name
// for choosing their version: a comma-separated list in which
// [LatestExperimental] asks for the latest development conventions instead
// of the pinned release ([SchemaURL]).
const SemconvOptInEnv = "OTEL_SEMCONV_STABILITY_OPT_IN"

// LatestExperimental is the [SemconvOptInEnv] value that selects the
// latest development GenAI conventions ([LatestSchemaURL]).
const LatestExperimental = "gen_ai_latest_experimental"

// LatestSchemaURL is the schema of the handler's tracer, meter and logger
// under [LatestExperimental]: the development GenAI conventions of
// open-telemetry/semantic-conventions-genai build on semantic conventions
// v1.44.0 (the version their documents link to).
const LatestSchemaURL = "https://opentelemetry.io/schemas/1.44.0"

// Metric names of the pinned release (v1.41).
const (
	metricOperationDuration  = "gen_ai.client.operation.duration"
	metricTokenUsage         = "gen_ai.client.token.usage"
	metricTimeToFirstChunk   = "gen_ai.client.operation.time_to_first_chunk"
	metricTimePerOutputChunk = "gen_ai.client.operation.time_per_output_chunk"
)

// Metric names of the latest development GenAI conventions besides token
// usage: model calls on gen_ai.client.inference.* and
// gen_ai.client.embeddings.*, and agents, tools and workflows on metrics of
// their own (none of them on gen_ai.client.operation.duration).
const (
	metricInferenceDuration    = "gen_ai.client.inference.duration"
	metricInferenceTTFC        = "gen_ai.client.inference.time_to_first_chunk"
	metricInferenceTPOC        = "gen_ai.client.inference.time_per_output_chunk"
	metricEmbeddingsDuration   = "gen_ai.client.embeddings.duration"
	metricEmbeddingsInput      = "gen_ai.client.embeddings.operation.input_tokens"
	metricInvokeAgentDuration  = "gen_ai.invoke_agent.duration"
	metricInvokeAgentInference = "gen_ai.invoke_agent.inference_calls"
	metricInvokeAgentToolCalls = "gen_ai.invoke_agent.tool_calls"
	metricExecuteToolDuration  = "gen_ai.execute_tool.duration"
	metricWorkflowDuration     = "gen_ai.workflow.duration"
)

// Metric names of the latest development GenAI conventions' token usage.
// They replace the release's single gen_ai.client.token.usage histogram:
// counters per token category (the cost proxy, each with
// gen_ai.token.modality) and per-operation histograms for percentiles.
const (
	metricUsageInputTokens      = "gen_ai.client.inference.usage.input_tokens"
	metricUsageOutputTokens     = "gen_ai.client.inference.usage.output_tokens"
	metricUsageCacheReadTokens  = "gen_ai.client.inference.usage.cache_read.input_tokens"
	metricUsageCacheWriteTokens = "gen_ai.client.inference.usage.cache_write.input_tokens"
	metricUsageReasoningTokens  = "gen_ai.client.inference.usage.reasoning.output_tokens"
	metricOperationInputTokens  = "gen_ai.client.inference.operation.input_tokens"
	metricOperationOutputTokens = "gen_ai.client.inference.operation.output_tokens"
)

// attrTokenModality is the modality of counted tokens: OpenAI-compatible
// usage reports no modality breakdown, so it is "unknown".
const attrTokenModality = attribute.Key("gen_ai.token.modality")

// latestExperimentalFromEnv reports whether [SemconvOptInEnv] lists
// [LatestExperimental].
func latestExperimentalFromEnv() bool {
	return optsIn(os.Getenv(SemconvOptInEnv), LatestExperimental)
}

// optsIn reports whether the comma-separated list v holds want (values
// are trimmed and compared without case, as the SDKs do).
func optsIn(v, want string) bool {
	for _, f := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(f), want) {
			return true
		}
	}
	return false
}

// Histogram bucket boundaries the conventions recommend: the release's for
// durations, ratios and tokens; the development conventions' for agent
// invocations (0.1 s to 409.6 s), workflows (1 s to 2 h) and per-agent call
// counts.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	agentBuckets    = []float64{0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6}
	workflowBuckets = []float64{1, 2, 4, 8, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}
	countBuckets    = []float64{1, 2, 4, 8, 16, 32, 64, 128}
	ratioBuckets    = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// instruments are the handler's metrics in one version of the conventions:
// the release's (latest false) or the development conventions' (true).
// Instruments of the other version are nil and never recorded.
type instruments struct {
	latest bool

	// release
	opDuration metric.Float64Histogram // every GenAI operation
	tokenUsage metric.Int64Histogram
	ttfc, tpoc metric.Float64Histogram

	// latest
	inferDuration, inferTTFC, inferTPOC       metric.Float64Histogram
	in, out, cacheRead, cacheWrite, reasoning metric.Int64Counter
	opIn, opOut                               metric.Int64Histogram
	embDuration                               metric.Float64Histogram
	embInput                                  metric.Int64Histogram
	agentDuration, toolDuration, wfDuration   metric.Float64Histogram
	agentInferenceCalls, agentToolCalls       metric.Int64Histogram

	// both
	cacheHit metric.Float64Histogram // share of input tokens read from the prompt cache
}

func newInstruments(meter metric.Meter, latest bool) (*instruments, error) {
	in := &instruments{latest: latest}
	f64 := func(dst *metric.Float64Histogram, name, unit, brief string, b []float64) error {
		h, err := meter.Float64Histogram(name, metric.WithDescription(brief), metric.WithUnit(unit),
			metric.WithExplicitBucketBoundaries(b...))
		if err != nil {
			return fmt.Errorf("otel: create %s: %w", name, err)
		}
		*dst = h
		return nil
	}
	i64 := func(dst *metric.Int64Histogram, name, unit, brief string, b []float64) error {
		h, err := meter.Int64Histogram(name, metric.WithDescription(brief), metric.WithUnit(unit),
			metric.WithExplicitBucketBoundaries(b...))
		if err != nil {
			return fmt.Errorf("otel: create %s: %w", name, err)
		}
		*dst = h
		return nil
	}
	ctr := func(dst *metric.Int64Counter, name, brief string) error {
		c, err := meter.Int64Counter(name, metric.WithDescription(brief), metric.WithUnit("{token}"))
		if err != nil {
			return fmt.Errorf("otel: create %s: %w", name, err)
		}
		*dst = c
		return nil
	}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	if !latest {
		add(f64(&in.opDuration, metricOperationDuration, "s", "GenAI operation duration.", durationBuckets))
		add(i64(&in.tokenUsage, metricTokenUsage, "{token}", "Number of input and output tokens used.", tokenBuckets))
		add(f64(&in.ttfc, metricTimeToFirstChunk, "s", "Time from the request to the first chunk of a streamed response.", durationBuckets))
		add(f64(&in.tpoc, metricTimePerOutputChunk, "s", "Time per output chunk after the first one, from the end of the previous chunk to the end of this one.", durationBuckets))
	} else {
		add(f64(&in.inferDuration, metricInferenceDuration, "s", "GenAI client inference operation duration.", durationBuckets))
		add(f64(&in.inferTTFC, metricInferenceTTFC, "s", "Time from the request to the first chunk of a streamed response.", durationBuckets))
		add(f64(&in.inferTPOC, metricInferenceTPOC, "s", "Time per output chunk after the first one, from the end of the previous chunk to the end of this one.", durationBuckets))
		add(ctr(&in.in, metricUsageInputTokens, "Input (prompt) tokens used, including cached tokens."))
		add(ctr(&in.out, metricUsageOutputTokens, "Output (completion) tokens used, including reasoning tokens."))
		add(ctr(&in.cacheRead, metricUsageCacheReadTokens, "Input tokens served from a provider-managed cache."))
		add(ctr(&in.cacheWrite, metricUsageCacheWriteTokens, "Input tokens written to a provider-managed cache."))
		add(ctr(&in.reasoning, metricUsageReasoningTokens, "Output tokens used for reasoning."))
		add(i64(&in.opIn, metricOperationInputTokens, "{token}", "Input (prompt) tokens used per inference operation.", tokenBuckets))
		add(i64(&in.opOut, metricOperationOutputTokens, "{token}", "Output (completion) tokens used per inference operation.", tokenBuckets))
		add(f64(&in.embDuration, metricEmbeddingsDuration, "s", "GenAI client embeddings operation duration.", durationBuckets))
		add(i64(&in.embInput, metricEmbeddingsInput, "{token}", "Input tokens used per embeddings operation.", tokenBuckets))
		add(f64(&in.agentDuration, metricInvokeAgentDuration, "s", "Duration of a GenAI agent invocation.", agentBuckets))
		add(i64(&in.agentInferenceCalls, metricInvokeAgentInference, "{inference_call}", "Inference calls a GenAI agent made during one invocation.", countBuckets))
		add(i64(&in.agentToolCalls, metricInvokeAgentToolCalls, "{tool_call}", "Tool calls a GenAI agent made during one invocation.", countBuckets))
		add(f64(&in.toolDuration, metricExecuteToolDuration, "s", "Duration of a tool execution.", durationBuckets))
		add(f64(&in.wfDuration, metricWorkflowDuration, "s", "GenAI workflow duration.", workflowBuckets))
	}
	add(f64(&in.cacheHit, metricPromptCacheHitRatio, "1", "Share of a model call's input tokens served from the provider's prompt cache.", ratioBuckets))
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return in, nil
}

// inference records the end of a model call: its duration, time to first
// chunk and per-chunk times, and its tokens. errType is "" on success;
// known says the server sent usage.
func (in *instruments) inference(ctx context.Context, set attribute.Set, embeddings bool, dur time.Duration,
	r observability.LLMResponse, errType string, known bool) {
	opt := metric.WithAttributeSet(set)
	u := r.Usage
	if !in.latest {
		in.opDuration.Record(ctx, dur.Seconds(), opt)
		if errType == "" {
			if r.TimeToFirstChunk > 0 {
				in.ttfc.Record(ctx, r.TimeToFirstChunk.Seconds(), opt)
			}
			for _, d := range r.ChunkIntervals {
				in.tpoc.Record(ctx, d.Seconds(), opt)
			}
		}
		if known {
			in.tokenUsage.Record(ctx, u.InputTokens, opt, metric.WithAttributes(attrTokenType.String("input")))
			if !embeddings {
				in.tokenUsage.Record(ctx, u.OutputTokens, opt, metric.WithAttributes(attrTokenType.String("output")))
			}
		}
		in.hitRatio(ctx, opt, u, known && !embeddings)
		return
	}
	if embeddings {
		in.embDuration.Record(ctx, dur.Seconds(), opt)
		if known && errType == "" {
			in.embInput.Record(ctx, u.InputTokens, opt)
		}
		return
	}
	in.inferDuration.Record(ctx, dur.Seconds(), opt)
	if errType == "" {
		if r.TimeToFirstChunk > 0 {
			in.inferTTFC.Record(ctx, r.TimeToFirstChunk.Seconds(), opt)
		}
		for _, d := range r.ChunkIntervals {
			in.inferTPOC.Record(ctx, d.Seconds(), opt)
		}
	}
	// Counters count every finished call, a failed one too (0, or what
	// was used before it failed): they are the spend. The per-operation
	// histograms take successful calls with known usage only, so that
	// their percentiles are those of answers.
	mod := []metric.AddOption{opt, metric.WithAttributes(attrTokenModality.String("unknown"))}
	in.in.Add(ctx, u.InputTokens, mod...)
	in.out.Add(ctx, u.OutputTokens, mod...)
	in.cacheRead.Add(ctx, u.CacheReadInputTokens, mod...)
	in.cacheWrite.Add(ctx, u.CacheCreationInputTokens, mod...)
	in.reasoning.Add(ctx, u.ReasoningTokens, mod...)
	if known && errType == "" {
		in.opIn.Record(ctx, u.InputTokens, opt)
		in.opOut.Record(ctx, u.OutputTokens, opt)
	}
	in.hitRatio(ctx, opt, u, known)
}

func (in *instruments) hitRatio(ctx context.Context, opt metric.RecordOption, u observability.Usage, ok bool) {
	if ok && u.InputTokens > 0 {
		in.cacheHit.Record(ctx, min(1, float64(u.CacheReadInputTokens)/float64(u.InputTokens)), opt)
	}
}

// operation records the duration of an agent, tool or workflow run on
// gen_ai.client.operation.duration (release) or its own metric
// (development conventions); set is its attribute set in that version.
func (in *instruments) operation(ctx context.Context, op string, dur time.Duration, set attribute.Set) {
	opt := metric.WithAttributeSet(set)
	if !in.latest {
		in.opDuration.Record(ctx, dur.Seconds(), opt)
		return
	}
	switch op {
	case opInvokeAgent:
		in.agentDuration.Record(ctx, dur.Seconds(), opt)
	case opExecuteTool:
		in.toolDuration.Record(ctx, dur.Seconds(), opt)
	case opInvokeWorkflow:
		in.wfDuration.Record(ctx, dur.Seconds(), opt)
	}
}

// agentCalls records the inference and tool calls of one agent invocation
// (development conventions only).
func (in *instruments) agentCalls(ctx context.Context, set attribute.Set, inference, tools int64) {
	if !in.latest {
		return
	}
	opt := metric.WithAttributeSet(set)
	in.agentInferenceCalls.Record(ctx, inference, opt)
	in.agentToolCalls.Record(ctx, tools, opt)
}
