package otelsage

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	logglobal "go.opentelemetry.io/otel/log/global"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// ScopeName is the instrumentation scope of the handler's tracer and meter.
const ScopeName = "github.com/sage-go/sage/sagents/observability/otelsage"

// CaptureContentEnv is the environment variable that chooses where
// message content, tool arguments and tool results go: true or SPAN_ONLY
// (on spans), EVENT_ONLY (on the gen_ai.client.inference.operation.details
// log event), SPAN_AND_EVENT (both); false or NO_CONTENT (nowhere, the
// default).
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// SchemaURL is the semantic-conventions schema of the handler's tracer,
// meter and logger by default: the GenAI conventions it follows are those
// of v1.41 (see [LatestSchemaURL] for the opt-in).
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
	// AttrUsageCacheWrite replaces AttrUsageCacheCreation in the latest
	// development conventions.
	AttrUsageCacheWrite    = attribute.Key("gen_ai.usage.cache_write.input_tokens")
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
	AttrSessionID          = attribute.Key("sage.session.id") // on runs that are no GenAI operation
	AttrRequestServiceTier = attribute.Key("openai.request.service_tier")
	AttrServiceTier        = attribute.Key("openai.response.service_tier")
	AttrSystemFingerprint  = attribute.Key("openai.response.system_fingerprint")
	AttrAPIType            = attribute.Key("openai.api.type")
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
	logger   otellog.Logger
	capture  CaptureMode
	maxLen   int
	provider string
	latest   bool // the development conventions (LatestExperimental)
	m        *instruments
}

var _ observability.Handler = (*Handler)(nil)

// HandlerOptions configures a [Handler]. The zero value uses the global
// providers and follows the environment.
type HandlerOptions struct {
	// TracerProvider defaults to the global one.
	TracerProvider trace.TracerProvider
	// MeterProvider defaults to the global one.
	MeterProvider metric.MeterProvider
	// LoggerProvider receives the GenAI log events; it defaults to the
	// global one (which drops them until one is set).
	LoggerProvider otellog.LoggerProvider
	// CaptureContent turns the capture of message content, tool arguments
	// and tool results on spans on or off (new(true)); nil follows
	// CaptureMode, then CaptureContentEnv.
	CaptureContent *bool
	// CaptureMode says where content goes (spans, events, both);
	// CaptureDefault follows CaptureContentEnv.
	CaptureMode CaptureMode
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

// CaptureMode says where captured content goes.
type CaptureMode uint8

// The capture modes, as CaptureContentEnv names them.
const (
	CaptureDefault        CaptureMode = iota // follow CaptureContentEnv
	CaptureNone                              // NO_CONTENT, false
	CaptureSpans                             // SPAN_ONLY, true
	CaptureEvents                            // EVENT_ONLY
	CaptureSpansAndEvents                    // SPAN_AND_EVENT
)

// Spans reports whether content goes on spans.
func (m CaptureMode) Spans() bool { return m == CaptureSpans || m == CaptureSpansAndEvents }

// Events reports whether content goes on log events (and the opt-in
// gen_ai.client.inference.operation.details event is emitted).
func (m CaptureMode) Events() bool { return m == CaptureEvents || m == CaptureSpansAndEvents }

// CaptureModeFromEnv reads CaptureContentEnv: a boolean, or one of the
// modes of the GenAI instrumentations; anything else is CaptureNone.
func CaptureModeFromEnv() CaptureMode { return parseCapture(os.Getenv(CaptureContentEnv)) }

// CaptureContentFromEnv reports whether CaptureContentEnv puts content on
// spans.
func CaptureContentFromEnv() bool { return CaptureModeFromEnv().Spans() }

func parseCapture(v string) CaptureMode {
	v = strings.TrimSpace(v)
	switch strings.ToUpper(v) {
	case "SPAN_ONLY":
		return CaptureSpans
	case "SPAN_AND_EVENT":
		return CaptureSpansAndEvents
	case "EVENT_ONLY":
		return CaptureEvents
	case "NO_CONTENT":
		return CaptureNone
	}
	if b, _ := strconv.ParseBool(v); b {
		return CaptureSpans
	}
	return CaptureNone
}

// NewHandler returns an OpenTelemetry handler.
func NewHandler(opts HandlerOptions) (*Handler, error) {
	tp, mp, lp := opts.TracerProvider, opts.MeterProvider, opts.LoggerProvider
	if tp == nil {
		tp = otelapi.GetTracerProvider()
	}
	if mp == nil {
		mp = otelapi.GetMeterProvider()
	}
	if lp == nil {
		lp = logglobal.GetLoggerProvider()
	}
	h := &Handler{maxLen: opts.MaxContentLength, provider: opts.DefaultProvider, latest: LatestExperimentalFromEnv()}
	if h.provider == "" {
		h.provider = "openai"
	}
	if h.maxLen <= 0 {
		h.maxLen = DefaultMaxContentLength
	}
	if opts.LatestExperimental != nil {
		h.latest = *opts.LatestExperimental
	}
	switch {
	case opts.CaptureContent != nil && *opts.CaptureContent:
		h.capture = CaptureSpans
	case opts.CaptureContent != nil:
		h.capture = CaptureNone
	case opts.CaptureMode != CaptureDefault:
		h.capture = opts.CaptureMode
	default:
		h.capture = CaptureModeFromEnv()
	}
	schema := h.SchemaURL()
	h.tracer = tp.Tracer(ScopeName, trace.WithSchemaURL(schema), trace.WithInstrumentationVersion(Version()))
	h.logger = lp.Logger(ScopeName, otellog.WithSchemaURL(schema), otellog.WithInstrumentationVersion(Version()))
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(schema), metric.WithInstrumentationVersion(Version()))
	var err error
	if h.m, err = newInstruments(meter, h.latest); err != nil {
		return nil, err
	}
	return h, nil
}

// CaptureContent reports whether the handler puts content on spans.
func (h *Handler) CaptureContent() bool { return h.capture.Spans() }

// SchemaURL is the schema of the handler's telemetry: [SchemaURL], or
// [LatestSchemaURL] under the latest development conventions.
func (h *Handler) SchemaURL() string {
	if h.latest {
		return LatestSchemaURL
	}
	return SchemaURL
}

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
