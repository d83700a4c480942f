package otelsage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

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
