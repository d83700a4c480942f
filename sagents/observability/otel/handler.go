package otel

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// ScopeName is the instrumentation scope of the handler's tracer and meter.
const ScopeName = "github.com/sage-go/sage/sagents/observability/otel"

// CaptureContentEnv is the environment variable that turns content capture on.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

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
	AttrMessageRole        = attribute.Key("gen_ai.message.role")
	AttrMessageContent     = attribute.Key("gen_ai.message.content")
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
	OpChat           = "chat"
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
	tokens   metric.Int64Histogram
	cacheHit metric.Float64Histogram // share of input tokens read from the prompt cache
}

var _ observability.Handler = (*Handler)(nil)

// Option configures a [Handler].
type Option func(*handlerConfig)

type handlerConfig struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	capture  *bool
	maxLen   int
	provider string
}

// WithTracerProvider sets the TracerProvider (default: the global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *handlerConfig) { c.tp = tp }
}

// WithMeterProvider sets the MeterProvider (default: the global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *handlerConfig) { c.mp = mp }
}

// WithCaptureContent turns the capture of message content, tool arguments
// and tool results on or off, overriding CaptureContentEnv.
func WithCaptureContent(on bool) Option {
	return func(c *handlerConfig) { c.capture = &on }
}

// WithMaxContentLength caps each captured content attribute at n bytes
// (DefaultMaxContentLength when n <= 0).
func WithMaxContentLength(n int) Option {
	return func(c *handlerConfig) { c.maxLen = n }
}

// WithDefaultProvider sets gen_ai.provider.name for model calls whose event
// does not name one (default "openai").
func WithDefaultProvider(name string) Option {
	return func(c *handlerConfig) { c.provider = name }
}

// CaptureContentFromEnv reports whether CaptureContentEnv asks for content
// capture.
func CaptureContentFromEnv() bool {
	v, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(CaptureContentEnv)))
	return v
}

// Histogram bucket boundaries recommended by the GenAI conventions.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ratioBuckets    = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// NewHandler returns an OpenTelemetry handler.
func NewHandler(opts ...Option) (*Handler, error) {
	c := handlerConfig{provider: "openai"}
	for _, o := range opts {
		o(&c)
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
		tracer:   c.tp.Tracer(ScopeName),
		maxLen:   c.maxLen,
		provider: c.provider,
	}
	if c.capture != nil {
		h.capture = *c.capture
	} else {
		h.capture = CaptureContentFromEnv()
	}
	meter := c.mp.Meter(ScopeName)
	var err error
	h.duration, err = meter.Float64Histogram("gen_ai.client.operation.duration",
		metric.WithDescription("GenAI operation duration."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otel: create duration histogram: %w", err)
	}
	h.tokens, err = meter.Int64Histogram("gen_ai.client.token.usage",
		metric.WithDescription("Number of input and output tokens used."), metric.WithUnit("{token}"),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otel: create token histogram: %w", err)
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

func spanName(op, name string) string {
	if name == "" {
		return op
	}
	return op + " " + name
}

func (h *Handler) begin(ctx context.Context, op, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) context.Context {
	if r, ok := observability.RunFromContext(ctx); ok && r.SessionID != "" {
		attrs = append(attrs, AttrConversationID.String(r.SessionID))
	}
	ctx, _ = h.tracer.Start(ctx, spanName(op, name), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx
}

func endOK(ctx context.Context, attrs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if len(attrs) > 0 {
		span.SetAttributes(attrs...)
	}
	span.End()
}

func endErr(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(AttrErrorType.String(observability.ErrorType(err)))
	span.End()
}

// truncate cuts s to at most max bytes on a rune boundary.
func (h *Handler) truncate(s string) string {
	if len(s) <= h.maxLen {
		return s
	}
	cut := h.maxLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[truncated %d bytes]", len(s)-cut)
}

type part struct {
	Type     string `json:"type"`
	Content  string `json:"content,omitempty"`
	ID       string `json:"id,omitempty"`
	Response string `json:"response,omitempty"`
}

type jsonMessage struct {
	Role  string `json:"role"`
	Name  string `json:"name,omitempty"`
	Parts []part `json:"parts"`
}

// messagesAttr renders messages in the GenAI conventions' JSON shape, each
// content truncated.
func (h *Handler) messagesAttr(key attribute.Key, msgs []observability.Message) (attribute.KeyValue, bool) {
	if !h.capture || len(msgs) == 0 {
		return attribute.KeyValue{}, false
	}
	out := make([]jsonMessage, 0, len(msgs))
	for _, m := range msgs {
		jm := jsonMessage{Role: m.Role, Name: m.Name}
		if m.ToolCallID != "" {
			jm.Parts = []part{{Type: "tool_call_response", ID: m.ToolCallID, Response: h.truncate(m.Content)}}
		} else {
			jm.Parts = []part{{Type: "text", Content: h.truncate(m.Content)}}
		}
		out = append(out, jm)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return attribute.KeyValue{}, false
	}
	return key.String(string(b)), true
}

// ---- chain ----

// ChainStart starts an invoke_workflow span.
func (h *Handler) ChainStart(ctx context.Context, i observability.ChainInfo) (context.Context, error) {
	attrs := []attribute.KeyValue{AttrOperationName.String(OpInvokeWorkflow)}
	if i.Name != "" {
		attrs = append(attrs, AttrWorkflowName.String(i.Name))
	}
	if a, ok := h.messagesAttr(AttrInputMessages, i.Inputs); ok {
		attrs = append(attrs, a)
	}
	return h.begin(ctx, OpInvokeWorkflow, i.Name, trace.SpanKindInternal, attrs...), nil
}

// ChainEnd ends the chain span.
func (h *Handler) ChainEnd(ctx context.Context, r observability.ChainResult) error {
	if a, ok := h.messagesAttr(AttrOutputMessages, r.Outputs); ok {
		endOK(ctx, a)
	} else {
		endOK(ctx)
	}
	return nil
}

// ChainError ends the chain span with an error.
func (h *Handler) ChainError(ctx context.Context, err error) error { endErr(ctx, err); return nil }

// ---- agent ----

// AgentStart starts an invoke_agent span.
func (h *Handler) AgentStart(ctx context.Context, i observability.AgentInfo) (context.Context, error) {
	attrs := []attribute.KeyValue{AttrOperationName.String(OpInvokeAgent)}
	if i.Name != "" {
		attrs = append(attrs, AttrAgentName.String(i.Name))
	}
	if i.Step != "" {
		attrs = append(attrs, AttrStepName.String(i.Step))
	}
	if a, ok := h.messagesAttr(AttrInputMessages, i.Inputs); ok {
		attrs = append(attrs, a)
	}
	return h.begin(ctx, OpInvokeAgent, i.Name, trace.SpanKindInternal, attrs...), nil
}

// AgentEnd ends the agent span.
func (h *Handler) AgentEnd(ctx context.Context, r observability.AgentResult) error {
	if a, ok := h.messagesAttr(AttrOutputMessages, r.Outputs); ok {
		endOK(ctx, a)
	} else {
		endOK(ctx)
	}
	return nil
}

// AgentError ends the agent span with an error.
func (h *Handler) AgentError(ctx context.Context, err error) error { endErr(ctx, err); return nil }

// ---- llm ----

type llmKey struct{}

// llmState is what the end of a model call needs for its metrics.
type llmState struct {
	start    time.Time
	provider string
	model    string
	server   string
	port     int
}

// LLMStart starts a CLIENT "chat {model}" span.
func (h *Handler) LLMStart(ctx context.Context, r observability.LLMRequest) (context.Context, error) {
	provider := r.Provider
	if provider == "" {
		provider = h.provider
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		AttrOperationName.String(OpChat),
		AttrProviderName.String(provider),
		AttrRequestModel.String(r.Model),
	)
	if r.ModelType != "" {
		attrs = append(attrs, AttrModelType.String(string(r.ModelType)))
	}
	if r.Step != "" {
		attrs = append(attrs, AttrStepName.String(r.Step))
	}
	if r.ServerAddress != "" {
		attrs = append(attrs, AttrServerAddress.String(r.ServerAddress))
	}
	if r.ServerPort != 0 {
		attrs = append(attrs, AttrServerPort.Int(r.ServerPort))
	}
	if r.Stream {
		attrs = append(attrs, AttrRequestStream.Bool(true))
	}
	if a, ok := h.messagesAttr(AttrInputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	ctx = h.begin(ctx, OpChat, r.Model, trace.SpanKindClient, attrs...)
	st := &llmState{start: time.Now(), provider: provider, model: r.Model, server: r.ServerAddress, port: r.ServerPort}
	return context.WithValue(ctx, llmKey{}, st), nil
}

func (st *llmState) metricAttrs(responseModel, errType string) attribute.Set {
	kv := make([]attribute.KeyValue, 0, 7)
	kv = append(kv, AttrOperationName.String(OpChat), AttrProviderName.String(st.provider),
		AttrRequestModel.String(st.model))
	if responseModel != "" {
		kv = append(kv, AttrResponseModel.String(responseModel))
	}
	if st.server != "" {
		kv = append(kv, AttrServerAddress.String(st.server))
	}
	if st.port != 0 {
		kv = append(kv, AttrServerPort.Int(st.port))
	}
	if errType != "" {
		kv = append(kv, AttrErrorType.String(errType))
	}
	return attribute.NewSet(kv...)
}

// LLMEnd ends the model-call span with the response model, finish reasons,
// token usage and time to first chunk, and records the metrics.
func (h *Handler) LLMEnd(ctx context.Context, r observability.LLMResponse) error {
	attrs := make([]attribute.KeyValue, 0, 11)
	if r.Model != "" {
		attrs = append(attrs, AttrResponseModel.String(r.Model))
	}
	if r.ID != "" {
		attrs = append(attrs, AttrResponseID.String(r.ID))
	}
	if len(r.FinishReasons) > 0 {
		attrs = append(attrs, AttrResponseFinish.StringSlice(r.FinishReasons))
	}
	u := r.Usage
	attrs = append(attrs, AttrUsageInput.Int64(u.InputTokens), AttrUsageOutput.Int64(u.OutputTokens))
	if u.CacheReadInputTokens != 0 {
		attrs = append(attrs, AttrUsageCacheRead.Int64(u.CacheReadInputTokens))
	}
	if u.CacheCreationInputTokens != 0 {
		attrs = append(attrs, AttrUsageCacheCreation.Int64(u.CacheCreationInputTokens))
	}
	if u.ReasoningTokens != 0 {
		attrs = append(attrs, AttrUsageReasoning.Int64(u.ReasoningTokens))
	}
	if r.TimeToFirstChunk > 0 {
		attrs = append(attrs, AttrTimeToFirstChunk.Float64(r.TimeToFirstChunk.Seconds()))
	}
	if a, ok := h.messagesAttr(AttrOutputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	endOK(ctx, attrs...)

	if st, _ := ctx.Value(llmKey{}).(*llmState); st != nil {
		set := st.metricAttrs(r.Model, "")
		h.duration.Record(ctx, time.Since(st.start).Seconds(), metric.WithAttributeSet(set))
		h.tokens.Record(ctx, u.InputTokens, metric.WithAttributeSet(set),
			metric.WithAttributes(AttrTokenType.String("input")))
		h.tokens.Record(ctx, u.OutputTokens, metric.WithAttributeSet(set),
			metric.WithAttributes(AttrTokenType.String("output")))
		if u.InputTokens > 0 {
			ratio := min(1, float64(u.CacheReadInputTokens)/float64(u.InputTokens))
			h.cacheHit.Record(ctx, ratio, metric.WithAttributeSet(set))
		}
	}
	return nil
}

// LLMError ends the model-call span with an error and records its duration.
func (h *Handler) LLMError(ctx context.Context, err error) error {
	endErr(ctx, err)
	if st, _ := ctx.Value(llmKey{}).(*llmState); st != nil {
		h.duration.Record(ctx, time.Since(st.start).Seconds(),
			metric.WithAttributeSet(st.metricAttrs("", observability.ErrorType(err))))
	}
	return nil
}

// ---- tool ----

// ToolStart starts an "execute_tool {tool}" span.
func (h *Handler) ToolStart(ctx context.Context, c observability.ToolCall) (context.Context, error) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		AttrOperationName.String(OpExecuteTool),
		AttrToolName.String(c.Name),
		AttrToolType.String("function"),
	)
	if c.CallID != "" {
		attrs = append(attrs, AttrToolCallID.String(c.CallID))
	}
	if h.capture && c.Arguments != "" {
		attrs = append(attrs, AttrToolCallArguments.String(h.truncate(c.Arguments)))
	}
	return h.begin(ctx, OpExecuteTool, c.Name, trace.SpanKindInternal, attrs...), nil
}

// ToolEnd ends the tool span.
func (h *Handler) ToolEnd(ctx context.Context, r observability.ToolResult) error {
	if h.capture && r.Result != "" {
		endOK(ctx, AttrToolCallResult.String(h.truncate(r.Result)))
	} else {
		endOK(ctx)
	}
	return nil
}

// ToolError ends the tool span with an error.
func (h *Handler) ToolError(ctx context.Context, err error) error { endErr(ctx, err); return nil }

// ---- message ----

// MessageStart does nothing: a message becomes one span event at its end.
func (h *Handler) MessageStart(ctx context.Context, _ observability.Message) (context.Context, error) {
	return ctx, nil
}

// MessageEnd adds a "gen_ai.message" event to the enclosing span.
func (h *Handler) MessageEnd(ctx context.Context, m observability.Message) error {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, AttrMessageRole.String(m.Role))
	if m.ToolCallID != "" {
		attrs = append(attrs, AttrToolCallID.String(m.ToolCallID))
	}
	if h.capture && m.Content != "" {
		attrs = append(attrs, AttrMessageContent.String(h.truncate(m.Content)))
	}
	span.AddEvent("gen_ai.message", trace.WithAttributes(attrs...))
	return nil
}
