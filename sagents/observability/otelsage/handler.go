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

// scopeName is the instrumentation scope of the handler's tracer and meter.
const scopeName = "github.com/sage-go/sage/sagents/observability/otelsage"

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
	attrOperationName      = attribute.Key("gen_ai.operation.name")
	attrProviderName       = attribute.Key("gen_ai.provider.name")
	attrRequestModel       = attribute.Key("gen_ai.request.model")
	attrRequestStream      = attribute.Key("gen_ai.request.stream")
	attrResponseModel      = attribute.Key("gen_ai.response.model")
	attrResponseID         = attribute.Key("gen_ai.response.id")
	attrResponseFinish     = attribute.Key("gen_ai.response.finish_reasons")
	attrTimeToFirstChunk   = attribute.Key("gen_ai.response.time_to_first_chunk")
	attrUsageInput         = attribute.Key("gen_ai.usage.input_tokens")
	attrUsageOutput        = attribute.Key("gen_ai.usage.output_tokens")
	attrUsageCacheRead     = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrUsageCacheCreation = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	// attrUsageCacheWrite replaces attrUsageCacheCreation in the latest
	// development conventions.
	attrUsageCacheWrite    = attribute.Key("gen_ai.usage.cache_write.input_tokens")
	attrUsageReasoning     = attribute.Key("gen_ai.usage.reasoning.output_tokens")
	attrConversationID     = attribute.Key("gen_ai.conversation.id")
	attrAgentName          = attribute.Key("gen_ai.agent.name")
	attrWorkflowName       = attribute.Key("gen_ai.workflow.name")
	attrToolName           = attribute.Key("gen_ai.tool.name")
	attrToolType           = attribute.Key("gen_ai.tool.type")
	attrToolCallID         = attribute.Key("gen_ai.tool.call.id")
	attrToolCallArguments  = attribute.Key("gen_ai.tool.call.arguments")
	attrToolCallResult     = attribute.Key("gen_ai.tool.call.result")
	attrInputMessages      = attribute.Key("gen_ai.input.messages")
	attrOutputMessages     = attribute.Key("gen_ai.output.messages")
	attrTokenType          = attribute.Key("gen_ai.token.type")
	attrErrorType          = attribute.Key("error.type")
	attrServerAddress      = attribute.Key("server.address")
	attrServerPort         = attribute.Key("server.port")
	attrToolDescription    = attribute.Key("gen_ai.tool.description")
	attrRequestTemperature = attribute.Key("gen_ai.request.temperature")
	attrRequestTopP        = attribute.Key("gen_ai.request.top_p")
	attrRequestMaxTokens   = attribute.Key("gen_ai.request.max_tokens")
	attrRequestStop        = attribute.Key("gen_ai.request.stop_sequences")
	attrRequestSeed        = attribute.Key("gen_ai.request.seed")
	attrRequestFreqPenalty = attribute.Key("gen_ai.request.frequency_penalty")
	attrRequestPresPenalty = attribute.Key("gen_ai.request.presence_penalty")
	attrRequestChoiceCount = attribute.Key("gen_ai.request.choice.count")
	attrOutputType         = attribute.Key("gen_ai.output.type")
	attrEmbeddingsDims     = attribute.Key("gen_ai.embeddings.dimension.count")
	attrModelType          = attribute.Key("sage.llm.model_type")
	attrStepName           = attribute.Key("sage.step.name")
	attrSessionID          = attribute.Key("sage.session.id") // on runs that are no GenAI operation
	attrRequestServiceTier = attribute.Key("openai.request.service_tier")
	attrServiceTier        = attribute.Key("openai.response.service_tier")
	attrSystemFingerprint  = attribute.Key("openai.response.system_fingerprint")
	attrAPIType            = attribute.Key("openai.api.type")
)

// metricPromptCacheHitRatio is sage's histogram of the share of input
// tokens read from the prompt cache, per model call with input (the GenAI
// conventions define the cache attributes but no such metric).
const metricPromptCacheHitRatio = "sage.llm.prompt_cache.hit_ratio"

// Operation names.
const (
	opInvokeWorkflow = "invoke_workflow"
	opInvokeAgent    = "invoke_agent"
	opChat           = observability.OpChat
	opEmbeddings     = observability.OpEmbeddings
	opExecuteTool    = "execute_tool"
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

// captureModeFromEnv reads CaptureContentEnv: a boolean, or one of the
// modes of the GenAI instrumentations; anything else is CaptureNone.
func captureModeFromEnv() CaptureMode { return parseCapture(os.Getenv(CaptureContentEnv)) }

// captureContentFromEnv reports whether CaptureContentEnv puts content on
// spans.
func captureContentFromEnv() bool { return captureModeFromEnv().Spans() }

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
	h := &Handler{maxLen: opts.MaxContentLength, provider: opts.DefaultProvider, latest: latestExperimentalFromEnv()}
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
		h.capture = captureModeFromEnv()
	}
	schema := h.SchemaURL()
	h.tracer = tp.Tracer(scopeName, trace.WithSchemaURL(schema), trace.WithInstrumentationVersion(instrumentationVersion()))
	h.logger = lp.Logger(scopeName, otellog.WithSchemaURL(schema), otellog.WithInstrumentationVersion(instrumentationVersion()))
	meter := mp.Meter(scopeName, metric.WithSchemaURL(schema), metric.WithInstrumentationVersion(instrumentationVersion()))
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

// instrumentationVersion is the instrumentation version of the handler's tracer and meter:
// the version of the sage module that was built, "devel" when unknown.
func instrumentationVersion() string { return version }

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
