package otel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
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

// Option configures a [Handler].
type Option func(*handlerConfig)

type handlerConfig struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	capture  *bool
	maxLen   int
	provider string
	latest   *bool
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

func spanName(op, name string) string {
	if name == "" {
		return op
	}
	return op + " " + name
}

// spanState is what the end of a span needs, kept in the context its start
// returns.
type spanState struct {
	start  time.Time
	metric []attribute.KeyValue // the attributes of its duration
	errs   *errLog
	agent  *agentTotals // for invoke_agent spans
	llm    *llmState    // for chat spans
	wf     *workflow    // for invoke_workflow runs
}

type stateKey struct{}

func stateOf(ctx context.Context) *spanState {
	st, _ := ctx.Value(stateKey{}).(*spanState)
	return st
}

// errLog remembers the errors already recorded as exceptions in one trace,
// so an error that travels up from a chat or tool span to the agent and the
// workflow is recorded once, where it happened.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

const maxLoggedErrors = 16

// seen reports whether err, or an error it wraps, was recorded before, and
// remembers err.
func (l *errLog) seen(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		if errors.Is(err, e) {
			return true
		}
	}
	if len(l.errs) == maxLoggedErrors {
		l.errs = append(l.errs[:0], l.errs[1:]...)
	}
	l.errs = append(l.errs, err)
	return false
}

// agentTotals gathers, for an invoke_agent span, the model calls made under
// it: the provider and model of the first, and the token totals.
type agentTotals struct {
	mu                      sync.Mutex
	provider, model, answer string
	input, output           int64
	usage                   bool
}

func (a *agentTotals) attrs() []attribute.KeyValue {
	a.mu.Lock()
	defer a.mu.Unlock()
	var kv []attribute.KeyValue
	if a.provider != "" {
		kv = append(kv, AttrProviderName.String(a.provider))
	}
	if a.model != "" {
		kv = append(kv, AttrRequestModel.String(a.model))
	}
	if a.answer != "" {
		kv = append(kv, AttrResponseModel.String(a.answer))
	}
	if a.usage {
		kv = append(kv, AttrUsageInput.Int64(a.input), AttrUsageOutput.Int64(a.output))
	}
	return kv
}

// nearestAgent returns the totals of the innermost agent run around ctx.
func nearestAgent(ctx context.Context) *agentTotals {
	a, _ := ctx.Value(agentKey{}).(*agentTotals)
	return a
}

type agentKey struct{}

// prepare fills st (shared error log, start, metric attributes) and adds
// the conversation id to attrs.
func prepare(ctx context.Context, op string, st *spanState, attrs []attribute.KeyValue) []attribute.KeyValue {
	if r, ok := observability.RunFromContext(ctx); ok && r.SessionID != "" {
		attrs = append(attrs, AttrConversationID.String(r.SessionID))
	}
	if parent := stateOf(ctx); parent != nil {
		st.errs = parent.errs
	} else {
		st.errs = &errLog{}
	}
	st.start = time.Now()
	st.metric = append([]attribute.KeyValue{AttrOperationName.String(op)}, st.metric...)
	return attrs
}

func (h *Handler) begin(ctx context.Context, op, name string, kind trace.SpanKind, st *spanState, attrs ...attribute.KeyValue) context.Context {
	attrs = prepare(ctx, op, st, attrs)
	if parent := stateOf(ctx); parent != nil && parent.wf != nil {
		ctx = parent.wf.child(ctx, h.tracer, op, name)
	}
	ctx, _ = h.tracer.Start(ctx, spanName(op, name), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, stateKey{}, st)
}

// workflow is an invoke_workflow run whose span starts with its first
// child, or never: a workflow whose first child is an agent of the same
// name (a single agent run wrapped in a chain) cannot be told apart from
// that agent, and the conventions say not to report it. Its agent span is
// then the root.
type workflow struct {
	mu     sync.Mutex
	parent context.Context // the context of ChainStart
	name   string
	attrs  []attribute.KeyValue
	start  time.Time
	span   trace.Span // once started
	elided bool       // no span: the agent stands for it
	used   bool       // a child has started
}

// child returns the context under which a child run of the workflow starts.
func (w *workflow) child(ctx context.Context, tracer trace.Tracer, op, name string) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := !w.used
	w.used = true
	if first && op == OpInvokeAgent && name == w.name {
		w.elided = true
	}
	if w.elided {
		return ctx
	}
	return trace.ContextWithSpan(ctx, w.startLocked(tracer))
}

func (w *workflow) startLocked(tracer trace.Tracer) trace.Span {
	if w.span == nil {
		_, w.span = tracer.Start(w.parent, spanName(OpInvokeWorkflow, w.name), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(w.start), trace.WithAttributes(w.attrs...))
	}
	return w.span
}

// ending returns the context in which the workflow's span ends, or false
// when it has none.
func (h *Handler) ending(ctx context.Context) (context.Context, bool) {
	st := stateOf(ctx)
	if st == nil || st.wf == nil {
		return ctx, true
	}
	w := st.wf
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.elided {
		return ctx, false
	}
	w.used = true
	return trace.ContextWithSpan(ctx, w.startLocked(h.tracer)), true
}

// end ends the span of ctx with attrs, records its duration, and returns
// its state (nil when ctx holds none).
func (h *Handler) end(ctx context.Context, attrs ...attribute.KeyValue) *spanState {
	span := trace.SpanFromContext(ctx)
	if len(attrs) > 0 {
		span.SetAttributes(attrs...)
	}
	span.End()
	st := stateOf(ctx)
	if st != nil && st.llm == nil {
		h.duration.Record(ctx, time.Since(st.start).Seconds(), metric.WithAttributes(st.metric...))
	}
	return st
}

// fail ends the span of ctx with an error: an Error status and error.type
// always, the exception event only where the error was first seen.
func (h *Handler) fail(ctx context.Context, err error, attrs ...attribute.KeyValue) *spanState {
	span := trace.SpanFromContext(ctx)
	st := stateOf(ctx)
	if st == nil || !st.errs.seen(err) {
		span.RecordError(err)
	}
	et := observability.ErrorType(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(append(attrs, AttrErrorType.String(et))...)
	span.End()
	if st != nil && st.llm == nil {
		h.duration.Record(ctx, time.Since(st.start).Seconds(),
			metric.WithAttributes(append(st.metric, AttrErrorType.String(et))...))
	}
	return st
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

// jsonPart is one message part of the GenAI conventions' message schema:
// text, tool_call or tool_call_response.
type jsonPart struct {
	Type      string  `json:"type"`
	Content   *string `json:"content,omitempty"`
	ID        string  `json:"id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments any     `json:"arguments,omitempty"`
	Response  *string `json:"response,omitempty"`
}

type jsonMessage struct {
	Role         string     `json:"role"`
	Name         string     `json:"name,omitempty"`
	Parts        []jsonPart `json:"parts"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

// arguments is a tool call's arguments as a JSON value when they are valid
// JSON within the content cap, else as a (truncated) string.
func (h *Handler) arguments(s string) any {
	if s == "" {
		return nil
	}
	if len(s) <= h.maxLen && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return h.truncate(s)
}

// messagesAttr renders messages in the GenAI conventions' JSON shape, each
// content truncated. Output messages carry a finish_reason: the message's
// own, else tool_calls or stop as the message says.
func (h *Handler) messagesAttr(key attribute.Key, msgs []observability.Message) (attribute.KeyValue, bool) {
	if !h.capture || len(msgs) == 0 {
		return attribute.KeyValue{}, false
	}
	output := key == AttrOutputMessages
	out := make([]jsonMessage, 0, len(msgs))
	for _, m := range msgs {
		jm := jsonMessage{Role: m.Role, Name: m.Name, Parts: []jsonPart{}}
		switch {
		case m.ToolCallID != "":
			r := h.truncate(m.Content)
			jm.Parts = append(jm.Parts, jsonPart{Type: "tool_call_response", ID: m.ToolCallID, Response: &r})
		case m.Content != "" || len(m.ToolCalls) == 0:
			c := h.truncate(m.Content)
			jm.Parts = append(jm.Parts, jsonPart{Type: "text", Content: &c})
		}
		for _, tc := range m.ToolCalls {
			jm.Parts = append(jm.Parts, jsonPart{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: h.arguments(tc.Arguments)})
		}
		if output {
			jm.FinishReason = m.FinishReason
			if jm.FinishReason == "" {
				jm.FinishReason = "stop"
				if len(m.ToolCalls) > 0 {
					jm.FinishReason = "tool_calls"
				}
			}
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

// ChainStart starts an invoke_workflow run. Its span starts with its first
// child (backdated to now), unless that child is an agent of the same name,
// which then stands for the workflow (see [workflow]).
func (h *Handler) ChainStart(ctx context.Context, i observability.ChainInfo) (context.Context, error) {
	attrs := []attribute.KeyValue{AttrOperationName.String(OpInvokeWorkflow)}
	st := &spanState{}
	if i.Name != "" {
		attrs = append(attrs, AttrWorkflowName.String(i.Name))
		st.metric = append(st.metric, AttrWorkflowName.String(i.Name))
	}
	if a, ok := h.messagesAttr(AttrInputMessages, i.Inputs); ok {
		attrs = append(attrs, a)
	}
	attrs = prepare(ctx, OpInvokeWorkflow, st, attrs)
	st.wf = &workflow{parent: ctx, name: i.Name, attrs: attrs, start: st.start}
	return context.WithValue(ctx, stateKey{}, st), nil
}

// ChainEnd ends the chain span.
func (h *Handler) ChainEnd(ctx context.Context, r observability.ChainResult) error {
	ctx, ok := h.ending(ctx)
	if !ok {
		return nil
	}
	if a, ok := h.messagesAttr(AttrOutputMessages, r.Outputs); ok {
		h.end(ctx, a)
	} else {
		h.end(ctx)
	}
	return nil
}

// ChainError ends the chain span with an error.
func (h *Handler) ChainError(ctx context.Context, err error) error {
	if ctx, ok := h.ending(ctx); ok {
		h.fail(ctx, err)
	}
	return nil
}

// ---- agent ----

// AgentStart starts an invoke_agent span. Its end adds the provider, model
// and token totals of the model calls made under it.
func (h *Handler) AgentStart(ctx context.Context, i observability.AgentInfo) (context.Context, error) {
	attrs := []attribute.KeyValue{AttrOperationName.String(OpInvokeAgent)}
	st := &spanState{agent: &agentTotals{}}
	if i.Name != "" {
		attrs = append(attrs, AttrAgentName.String(i.Name))
		st.metric = append(st.metric, AttrAgentName.String(i.Name))
	}
	if i.Step != "" {
		attrs = append(attrs, AttrStepName.String(i.Step))
	}
	if a, ok := h.messagesAttr(AttrInputMessages, i.Inputs); ok {
		attrs = append(attrs, a)
	}
	ctx = h.begin(ctx, OpInvokeAgent, i.Name, trace.SpanKindInternal, st, attrs...)
	return context.WithValue(ctx, agentKey{}, st.agent), nil
}

func agentAttrs(ctx context.Context) []attribute.KeyValue {
	if st := stateOf(ctx); st != nil && st.agent != nil {
		return st.agent.attrs()
	}
	return nil
}

// AgentEnd ends the agent span.
func (h *Handler) AgentEnd(ctx context.Context, r observability.AgentResult) error {
	attrs := agentAttrs(ctx)
	if a, ok := h.messagesAttr(AttrOutputMessages, r.Outputs); ok {
		attrs = append(attrs, a)
	}
	h.end(ctx, attrs...)
	return nil
}

// AgentError ends the agent span with an error.
func (h *Handler) AgentError(ctx context.Context, err error) error {
	h.fail(ctx, err, agentAttrs(ctx)...)
	return nil
}

// ---- llm ----

// llmState is what the end of a model call needs for its metrics.
type llmState struct {
	op       string
	provider string
	model    string
	server   string
	port     int
	agent    *agentTotals
}

func paramAttrs(p observability.RequestParams) []attribute.KeyValue {
	var kv []attribute.KeyValue
	if p.Temperature != nil {
		kv = append(kv, AttrRequestTemperature.Float64(*p.Temperature))
	}
	if p.TopP != nil {
		kv = append(kv, AttrRequestTopP.Float64(*p.TopP))
	}
	if p.MaxTokens > 0 {
		kv = append(kv, AttrRequestMaxTokens.Int(p.MaxTokens))
	}
	if len(p.Stop) > 0 {
		kv = append(kv, AttrRequestStop.StringSlice(p.Stop))
	}
	if p.Seed != nil {
		kv = append(kv, AttrRequestSeed.Int64(*p.Seed))
	}
	if p.FrequencyPenalty != nil {
		kv = append(kv, AttrRequestFreqPenalty.Float64(*p.FrequencyPenalty))
	}
	if p.PresencePenalty != nil {
		kv = append(kv, AttrRequestPresPenalty.Float64(*p.PresencePenalty))
	}
	if p.ChoiceCount > 1 {
		kv = append(kv, AttrRequestChoiceCount.Int(p.ChoiceCount))
	}
	if p.OutputType != "" {
		kv = append(kv, AttrOutputType.String(p.OutputType))
	}
	if p.Dimensions > 0 {
		kv = append(kv, AttrEmbeddingsDims.Int(p.Dimensions))
	}
	return kv
}

// LLMStart starts a CLIENT "chat {model}" (or "embeddings {model}") span.
func (h *Handler) LLMStart(ctx context.Context, r observability.LLMRequest) (context.Context, error) {
	provider := r.Provider
	if provider == "" {
		provider = h.provider
	}
	op := r.Operation
	if op == "" {
		op = OpChat
	}
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs,
		AttrOperationName.String(op),
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
	attrs = append(attrs, paramAttrs(r.Params)...)
	if a, ok := h.messagesAttr(AttrInputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	ls := &llmState{op: op, provider: provider, model: r.Model, server: r.ServerAddress, port: r.ServerPort, agent: nearestAgent(ctx)}
	if a := ls.agent; a != nil && op == OpChat { // the agent's model is that of its first chat
		a.mu.Lock()
		if a.model == "" {
			a.provider, a.model = provider, r.Model
		}
		a.mu.Unlock()
	}
	return h.begin(ctx, op, r.Model, trace.SpanKindClient, &spanState{llm: ls}, attrs...), nil
}

func (st *llmState) metricAttrs(responseModel, errType string) attribute.Set {
	kv := make([]attribute.KeyValue, 0, 7)
	kv = append(kv, AttrOperationName.String(st.op), AttrProviderName.String(st.provider),
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
// token usage and time to first chunk, and records the metrics. A usage
// whose input and output counts are both zero is unknown and not reported.
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
	known := u.InputTokens != 0 || u.OutputTokens != 0
	st := stateOf(ctx)
	embeddings := st != nil && st.llm != nil && st.llm.op == OpEmbeddings
	switch {
	case known && embeddings: // embeddings produce no output tokens
		attrs = append(attrs, AttrUsageInput.Int64(u.InputTokens))
	case known:
		attrs = append(attrs, AttrUsageInput.Int64(u.InputTokens), AttrUsageOutput.Int64(u.OutputTokens))
	}
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
	h.end(ctx, attrs...)
	if st == nil || st.llm == nil {
		return nil
	}
	ls := st.llm
	if a := ls.agent; a != nil && !embeddings {
		a.mu.Lock()
		if r.Model != "" && a.answer == "" {
			a.answer = r.Model
		}
		if known {
			a.usage = true
			a.input += u.InputTokens
			a.output += u.OutputTokens
		}
		a.mu.Unlock()
	}
	set := ls.metricAttrs(r.Model, "")
	h.duration.Record(ctx, time.Since(st.start).Seconds(), metric.WithAttributeSet(set))
	if r.TimeToFirstChunk > 0 {
		h.ttfc.Record(ctx, r.TimeToFirstChunk.Seconds(), metric.WithAttributeSet(set))
	}
	h.tokens.record(ctx, set, u, known, embeddings)
	if known {
		if u.InputTokens > 0 && !embeddings {
			ratio := min(1, float64(u.CacheReadInputTokens)/float64(u.InputTokens))
			h.cacheHit.Record(ctx, ratio, metric.WithAttributeSet(set))
		}
	}
	return nil
}

// LLMError ends the model-call span with an error and records its duration.
func (h *Handler) LLMError(ctx context.Context, err error) error {
	st := h.fail(ctx, err)
	if st != nil && st.llm != nil {
		set := st.llm.metricAttrs("", observability.ErrorType(err))
		h.duration.Record(ctx, time.Since(st.start).Seconds(), metric.WithAttributeSet(set))
		h.tokens.record(ctx, set, observability.Usage{}, false, st.llm.op == OpEmbeddings)
	}
	return nil
}

// ---- tool ----

// ToolStart starts an "execute_tool {tool}" span.
func (h *Handler) ToolStart(ctx context.Context, c observability.ToolCall) (context.Context, error) {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		AttrOperationName.String(OpExecuteTool),
		AttrToolName.String(c.Name),
		AttrToolType.String("function"),
	)
	if c.Description != "" {
		attrs = append(attrs, AttrToolDescription.String(h.truncate(c.Description)))
	}
	if c.CallID != "" {
		attrs = append(attrs, AttrToolCallID.String(c.CallID))
	}
	if h.capture && c.Arguments != "" {
		attrs = append(attrs, AttrToolCallArguments.String(h.truncate(c.Arguments)))
	}
	st := &spanState{metric: []attribute.KeyValue{AttrToolName.String(c.Name)}}
	return h.begin(ctx, OpExecuteTool, c.Name, trace.SpanKindInternal, st, attrs...), nil
}

// ToolEnd ends the tool span.
func (h *Handler) ToolEnd(ctx context.Context, r observability.ToolResult) error {
	if h.capture && r.Result != "" {
		h.end(ctx, AttrToolCallResult.String(h.truncate(r.Result)))
	} else {
		h.end(ctx)
	}
	return nil
}

// ToolError ends the tool span with an error.
func (h *Handler) ToolError(ctx context.Context, err error) error { h.fail(ctx, err); return nil }

// ---- message ----

// MessageStart does nothing.
func (h *Handler) MessageStart(ctx context.Context, _ observability.Message) (context.Context, error) {
	return ctx, nil
}

// MessageEnd does nothing: no version of the GenAI conventions defines a
// per-message event (gen_ai.message is not one), and the messages of a run
// are on its spans' gen_ai.input.messages and gen_ai.output.messages.
func (h *Handler) MessageEnd(context.Context, observability.Message) error { return nil }
