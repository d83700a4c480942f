package otelsage

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// ScopeName is the instrumentation scope of the handler's tracer and meter.
const ScopeName = "github.com/sage-go/sage/sagents/observability/otelsage"

// CaptureContentEnv is the environment variable that turns content capture
// on: true, SPAN_ONLY or SPAN_AND_EVENT (content goes on spans); false,
// NO_CONTENT or EVENT_ONLY leave it off (the handler emits no content
// events).
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// SchemaURL is the semantic-conventions schema of the handler's tracer and
// meter: the GenAI conventions it follows are those of v1.41.
const SchemaURL = "https://opentelemetry.io/schemas/1.41.0"

// DefaultMaxContentLength is the default cap, in bytes, of each captured
// content attribute.
const DefaultMaxContentLength = 4096

// Attribute keys of the GenAI semantic conventions (and a few of ours).
const (
	AttrOperationName      = attribute.Key("gen_ai.operation.name")
	AttrProviderName       = attribute.Key("gen_ai.provider.name")
	AttrRequestModel       = attribute.Key("gen_ai.request.model")
	AttrRequestStream      = attribute.Key("gen_ai.request.stream")
	AttrResponseModel      = attribute.Key("gen_ai.response.model")
	AttrResponseID         = attribute.Key("gen_ai.response.id")
	AttrResponseFinish     = attribute.Key("gen_ai.response.finish_reasons")
	AttrTimeToFirstChunk   = attribute.Key("gen_ai.response.time_to_first_chunk")
	AttrUsageInput         = attribute.Key("gen_ai.usage.input_tokens")
	AttrUsageOutput        = attribute.Key("gen_ai.usage.output_tokens")
	AttrUsageCacheRead     = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	AttrUsageCacheCreation = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	AttrUsageReasoning     = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	AttrConversationID     = attribute.Key("gen_ai.conversation.id")
	AttrAgentName          = attribute.Key("gen_ai.agent.name")
	AttrWorkflowName       = attribute.Key("gen_ai.workflow.name")
	AttrToolName           = attribute.Key("gen_ai.tool.name")
	AttrToolType           = attribute.Key("gen_ai.tool.type")
	AttrToolCallID         = attribute.Key("gen_ai.tool.call.id")
	AttrToolCallArguments  = attribute.Key("gen_ai.tool.call.arguments")
	AttrToolCallResult     = attribute.Key("gen_ai.tool.call.result")
	AttrInputMessages      = attribute.Key("gen_ai.input.messages")
	AttrOutputMessages     = attribute.Key("gen_ai.output.messages")
	AttrTokenType          = attribute.Key("gen_ai.token.type")
	AttrErrorType          = attribute.Key("error.type")
	AttrServerAddress      = attribute.Key("server.address")
	AttrServerPort         = attribute.Key("server.port")
	AttrToolDescription    = attribute.Key("gen_ai.tool.description")
	AttrRequestTemperature = attribute.Key("gen_ai.request.temperature")
	AttrRequestTopP        = attribute.Key("gen_ai.request.top_p")
	AttrRequestMaxTokens   = attribute.Key("gen_ai.request.max_tokens")
	AttrRequestStop        = attribute.Key("gen_ai.request.stop_sequences")
	AttrRequestSeed        = attribute.Key("gen_ai.request.seed")
	AttrRequestFreqPenalty = attribute.Key("gen_ai.request.frequency_penalty")
	AttrRequestPresPenalty = attribute.Key("gen_ai.request.presence_penalty")
	AttrRequestChoiceCount = attribute.Key("gen_ai.request.choice.count")
	AttrOutputType         = attribute.Key("gen_ai.output.type")
	AttrEmbeddingsDims     = attribute.Key("gen_ai.embeddings.dimension.count")
	AttrModelType          = attribute.Key("sage.llm.model_type")
	AttrStepName           = attribute.Key("sage.step.name")
)

// MetricPromptCacheHitRatio is sage's histogram of the share of input
// tokens read from the prompt cache, per model call with input (the GenAI
// conventions define the cache attributes but no such metric).
const MetricPromptCacheHitRatio = "sage.llm.prompt_cache.hit_ratio"

// Operation names.
const (
	OpInvokeWorkflow = "invoke_workflow"
	OpInvokeAgent    = "invoke_agent"
	OpChat           = observability.OpChat
	OpEmbeddings     = observability.OpEmbeddings
	OpExecuteTool    = "execute_tool"
)

// Handler is the OpenTelemetry observability.Handler. Create it with
// [NewHandler]; it is safe for concurrent use.
type Handler struct {
	tracer   trace.Tracer
	capture  bool
	maxLen   int
	provider string

	duration metric.Float64Histogram
	tokens   tokenMetrics
	ttfc     metric.Float64Histogram
	cacheHit metric.Float64Histogram // share of input tokens read from the prompt cache
}

var _ observability.Handler = (*Handler)(nil)

// HandlerOptions configures a [Handler]. The zero value uses the global
// providers and follows the environment.
type HandlerOptions struct {
	// TracerProvider defaults to the global one.
	TracerProvider trace.TracerProvider
	// MeterProvider defaults to the global one.
	MeterProvider metric.MeterProvider
	// CaptureContent turns the capture of message content, tool arguments
	// and tool results on or off (new(true)); nil follows
	// CaptureContentEnv.
	CaptureContent *bool
	// MaxContentLength caps each captured content attribute in bytes
	// (DefaultMaxContentLength when <= 0).
	MaxContentLength int
	// DefaultProvider is gen_ai.provider.name for model calls whose event
	// names none ("openai" when empty).
	DefaultProvider string
	// LatestExperimental chooses the latest development GenAI conventions
	// (true) or the pinned release (false); nil follows [SemconvOptInEnv].
	LatestExperimental *bool
}

// CaptureContentFromEnv reports whether CaptureContentEnv asks for content
// capture.
func CaptureContentFromEnv() bool {
	return parseCapture(os.Getenv(CaptureContentEnv))
}

// parseCapture reads a CaptureContentEnv value: a boolean, or one of the
// modes of the Python GenAI instrumentations (whether content goes on
// spans).
func parseCapture(v string) bool {
	v = strings.TrimSpace(v)
	switch strings.ToUpper(v) {
	case "SPAN_ONLY", "SPAN_AND_EVENT":
		return true
	case "NO_CONTENT", "EVENT_ONLY":
		return false
	}
	b, _ := strconv.ParseBool(v)
	return b
}

// Histogram bucket boundaries recommended by the GenAI conventions.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ratioBuckets    = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

type handlerConfig struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	capture  *bool
	maxLen   int
	provider string
	latest   *bool
}

// NewHandler returns an OpenTelemetry handler.
func NewHandler(opts HandlerOptions) (*Handler, error) {
	c := handlerConfig{tp: opts.TracerProvider, mp: opts.MeterProvider, capture: opts.CaptureContent,
		maxLen: opts.MaxContentLength, provider: opts.DefaultProvider, latest: opts.LatestExperimental}
	if c.provider == "" {
		c.provider = "openai"
	}
	if c.tp == nil {
		c.tp = otelapi.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otelapi.GetMeterProvider()
	}
	if c.maxLen <= 0 {
		c.maxLen = DefaultMaxContentLength
	}
	h := &Handler{
		tracer: c.tp.Tracer(ScopeName, trace.WithSchemaURL(SchemaURL),
			trace.WithInstrumentationVersion(Version())),
		maxLen:   c.maxLen,
		provider: c.provider,
	}
	if c.capture != nil {
		h.capture = *c.capture
	} else {
		h.capture = CaptureContentFromEnv()
	}
	meter := c.mp.Meter(ScopeName, metric.WithSchemaURL(SchemaURL),
		metric.WithInstrumentationVersion(Version()))
	var err error
	h.duration, err = meter.Float64Histogram("gen_ai.client.operation.duration",
		metric.WithDescription("GenAI operation duration."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otel: create duration histogram: %w", err)
	}
	latest := LatestExperimentalFromEnv()
	if c.latest != nil {
		latest = *c.latest
	}
	newTokens := newReleaseTokens
	if latest {
		newTokens = newLatestTokens
	}
	if h.tokens, err = newTokens(meter); err != nil {
		return nil, err
	}
	h.ttfc, err = meter.Float64Histogram("gen_ai.client.operation.time_to_first_chunk",
		metric.WithDescription("Time from the request to the first chunk of a streamed response."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otel: create time-to-first-chunk histogram: %w", err)
	}
	h.cacheHit, err = meter.Float64Histogram(MetricPromptCacheHitRatio,
		metric.WithDescription("Share of a model call's input tokens served from the provider's prompt cache."),
		metric.WithUnit("1"), metric.WithExplicitBucketBoundaries(ratioBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otel: create prompt cache histogram: %w", err)
	}
	return h, nil
}

// CaptureContent reports whether the handler exports content.
func (h *Handler) CaptureContent() bool { return h.capture }

// Version is the instrumentation version of the handler's tracer and meter:
// the version of the sage module that was built, "devel" when unknown.
func Version() string { return version }

var version = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == modulePath && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				return d.Version
			}
		}
	}
	return "devel"
}()

const modulePath = "github.com/sage-go/sage"
