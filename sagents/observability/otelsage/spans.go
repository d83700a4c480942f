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
	op    string // the GenAI operation: invoke_agent, execute_tool, chat, ...
	start time.Time
	errs  *errLog
	agent *agentTotals // for invoke_agent spans
	llm   *llmState    // for chat and embeddings spans
	wf    *workflow    // for chain runs
	tool  *toolState   // for execute_tool spans
}

// toolState is what a tool's metrics need.
type toolState struct {
	name, agent string
	totals      *agentTotals // of the agent that called it, if any
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

// agentTotals gathers, for an invoke_agent span, what the model and tool
// calls made under it add up to: the provider and model (the agent's own,
// else those of its first call), the last call's finish reasons and the
// token totals.
type agentTotals struct {
	mu                      sync.Mutex
	name                    string
	provider, model, answer string
	finish                  []string
	input, output           int64
	cacheRead, cacheWrite   int64
	usage                   bool
	inferenceCalls          int64
	toolCalls               int64
}

// attrs are the agent span's attributes at its end; latest leaves out what
// the development conventions do not put on in-process agents.
func (a *agentTotals) attrs(latest bool) []attribute.KeyValue {
	a.mu.Lock()
	defer a.mu.Unlock()
	var kv []attribute.KeyValue
	if a.provider != "" && !latest {
		kv = append(kv, attrProviderName.String(a.provider))
	}
	if a.model != "" {
		kv = append(kv, attrRequestModel.String(a.model))
	}
	if a.answer != "" {
		kv = append(kv, attrResponseModel.String(a.answer))
	}
	if len(a.finish) > 0 {
		kv = append(kv, attrResponseFinish.StringSlice(a.finish))
	}
	if a.usage {
		kv = append(kv, attrUsageInput.Int64(a.input), attrUsageOutput.Int64(a.output))
		if a.cacheRead > 0 {
			kv = append(kv, attrUsageCacheRead.Int64(a.cacheRead))
		}
		if a.cacheWrite > 0 {
			kv = append(kv, cacheWriteKey(latest).Int64(a.cacheWrite))
		}
	}
	return kv
}

// cacheWriteKey is the attribute of tokens written to the prompt cache in
// the chosen conventions.
func cacheWriteKey(latest bool) attribute.Key {
	if latest {
		return attrUsageCacheWrite
	}
	return attrUsageCacheCreation
}

func (a *agentTotals) providerModel() (string, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.provider, a.model
}

// nearestAgent returns the totals of the innermost agent run around ctx.
func nearestAgent(ctx context.Context) *agentTotals {
	a, _ := ctx.Value(agentKey{}).(*agentTotals)
	return a
}

type agentKey struct{}

// prepare fills st (shared error log, start) and adds the conversation id
// to attrs.
func prepare(ctx context.Context, st *spanState, attrs []attribute.KeyValue) []attribute.KeyValue {
	if r, ok := observability.RunFromContext(ctx); ok && r.SessionID != "" {
		attrs = append(attrs, attrConversationID.String(r.SessionID))
	}
	if parent := stateOf(ctx); parent != nil {
		st.errs = parent.errs
	} else {
		st.errs = &errLog{}
	}
	st.start = time.Now()
	return attrs
}

// begin starts the span of a GenAI operation (agent, model call, tool).
func (h *Handler) begin(ctx context.Context, name string, kind trace.SpanKind, st *spanState, attrs ...attribute.KeyValue) context.Context {
	attrs = prepare(ctx, st, attrs)
	if parent := stateOf(ctx); parent != nil && parent.wf != nil {
		ctx = parent.wf.child(ctx, h, st.op, name, true)
	}
	ctx, _ = h.tracer.Start(ctx, spanName(st.op, name), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, stateKey{}, st)
}

// workflow is a chain run. Its span starts with its first child (backdated
// to the chain's start), or never: a chain whose first child is an agent
// of the same name (a single agent run wrapped in a chain) cannot be told
// apart from that agent, which stands for it. The span is an
// invoke_workflow span only once the chain groups GenAI operations (two
// agents, model calls or tools directly under it); until then, and for a
// chain of one agent plus sandbox work (sage agent) or of sandbox work
// only (sage exec), it is a plain span named after the chain, with no
// GenAI name, attribute or metric.
type workflow struct {
	mu       sync.Mutex
	parent   context.Context // the context of ChainStart
	name     string
	session  string
	inputs   []attribute.KeyValue // the workflow's attributes besides its name
	start    time.Time
	span     trace.Span // once started
	elided   bool       // no span: the agent stands for it
	used     bool       // a child has started
	genai    int        // GenAI operations started directly under it
	promoted bool       // it is an invoke_workflow span
}

// child returns the context under which a child run of the workflow starts;
// genai says the child is a GenAI operation.
func (w *workflow) child(ctx context.Context, h *Handler, op, name string, genai bool) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := !w.used
	w.used = true
	if first && op == opInvokeAgent && name == w.name {
		w.elided = true
	}
	if w.elided {
		return ctx
	}
	span := w.startLocked(h)
	if genai {
		w.genai++
		if w.genai >= 2 && !w.promoted {
			w.promoted = true
			span.SetName(spanName(opInvokeWorkflow, w.name))
			span.SetAttributes(w.workflowAttrs()...)
		}
	}
	return trace.ContextWithSpan(ctx, span)
}

func (w *workflow) workflowAttrs() []attribute.KeyValue {
	kv := []attribute.KeyValue{attrOperationName.String(opInvokeWorkflow)}
	if w.name != "" {
		kv = append(kv, attrWorkflowName.String(w.name))
	}
	if w.session != "" {
		kv = append(kv, attrConversationID.String(w.session))
	}
	return append(kv, w.inputs...)
}

func (w *workflow) startLocked(h *Handler) trace.Span {
	if w.span == nil {
		name := w.name
		if name == "" {
			name = "chain"
		}
		var attrs []attribute.KeyValue
		if w.session != "" {
			attrs = append(attrs, attrSessionID.String(w.session))
		}
		_, w.span = h.tracer.Start(w.parent, name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(w.start), trace.WithAttributes(attrs...))
	}
	return w.span
}

// ending returns the context in which the chain's span ends and whether it
// is a workflow, or false for ok when it has no span.
func (h *Handler) ending(ctx context.Context) (_ context.Context, promoted, ok bool) {
	st := stateOf(ctx)
	if st == nil || st.wf == nil {
		return ctx, false, false
	}
	w := st.wf
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.elided {
		return ctx, false, false
	}
	w.used = true
	return trace.ContextWithSpan(ctx, w.startLocked(h)), w.promoted, true
}

// end ends the span of ctx with attrs, records the operation's duration,
// and returns its state (nil when ctx holds none).
func (h *Handler) end(ctx context.Context, attrs ...attribute.KeyValue) *spanState {
	span := trace.SpanFromContext(ctx)
	if len(attrs) > 0 {
		span.SetAttributes(attrs...)
	}
	span.End()
	st := stateOf(ctx)
	h.recordOperation(ctx, st, "")
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
	span.SetAttributes(append(attrs, attrErrorType.String(et))...)
	span.End()
	h.recordOperation(ctx, st, et)
	return st
}

// recordOperation records the duration of an agent, tool or workflow run
// (model calls record their own, with their response).
func (h *Handler) recordOperation(ctx context.Context, st *spanState, errType string) {
	if st == nil || st.llm != nil || st.op == "" {
		return
	}
	if st.wf != nil {
		st.wf.mu.Lock()
		promoted := st.wf.promoted
		st.wf.mu.Unlock()
		if !promoted {
			return // not a GenAI operation
		}
	}
	dur := time.Since(st.start)
	latest := h.latest
	// The release's gen_ai.client.operation.duration takes the operation
	// name and the provider; the development conventions' own metrics
	// neither (their name says the operation).
	kv := make([]attribute.KeyValue, 0, 6)
	if !latest {
		kv = append(kv, attrOperationName.String(st.op))
	}
	provider := h.provider
	switch {
	case st.agent != nil:
		p, model := st.agent.providerModel()
		if p != "" {
			provider = p
		}
		if st.agent.name != "" {
			kv = append(kv, attrAgentName.String(st.agent.name))
		}
		if model != "" {
			kv = append(kv, attrRequestModel.String(model))
		}
	case st.tool != nil:
		if a := st.tool.totals; a != nil {
			if p, _ := a.providerModel(); p != "" {
				provider = p
			}
		}
		kv = append(kv, attrToolName.String(st.tool.name))
		if latest {
			kv = append(kv, attrToolType.String("function"))
			if st.tool.agent != "" {
				kv = append(kv, attrAgentName.String(st.tool.agent))
			}
		}
	case st.wf != nil:
		if st.wf.name != "" {
			kv = append(kv, attrWorkflowName.String(st.wf.name))
		}
	}
	if !latest {
		kv = append(kv, attrProviderName.String(provider))
	}
	if errType != "" {
		kv = append(kv, attrErrorType.String(errType))
	}
	h.m.operation(ctx, st.op, dur, attribute.NewSet(kv...))
	if st.agent != nil && errType == "" {
		st.agent.mu.Lock()
		calls, tools := st.agent.inferenceCalls, st.agent.toolCalls
		st.agent.mu.Unlock()
		var set []attribute.KeyValue
		if st.agent.name != "" {
			set = append(set, attrAgentName.String(st.agent.name))
		}
		h.m.agentCalls(ctx, attribute.NewSet(set...), calls, tools)
	}
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

// outputFinishReason maps a provider's finish reason to the message
// schema's values: stop, length, content_filter, tool_call, error. OpenAI's
// "tool_calls" and "function_call" are "tool_call"; other values pass.
func outputFinishReason(r string, toolCalls bool) string {
	switch r {
	case "":
		if toolCalls {
			return "tool_call"
		}
		return "stop"
	case "tool_calls", "function_call":
		return "tool_call"
	}
	return r
}

// jsonMessages renders messages in the GenAI conventions' JSON shape, each
// content truncated. Output messages carry a finish_reason: the message's
// own, else tool_call or stop as the message says.
func (h *Handler) jsonMessages(msgs []observability.Message, output bool) []jsonMessage {
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
			jm.FinishReason = outputFinishReason(m.FinishReason, len(m.ToolCalls) > 0)
		}
		out = append(out, jm)
	}
	return out
}

// messagesAttr is messages as the span attribute key, when content goes on
// spans.
func (h *Handler) messagesAttr(key attribute.Key, msgs []observability.Message) (attribute.KeyValue, bool) {
	if !h.capture.Spans() || len(msgs) == 0 {
		return attribute.KeyValue{}, false
	}
	b, err := json.Marshal(h.jsonMessages(msgs, key == attrOutputMessages))
	if err != nil {
		return attribute.KeyValue{}, false
	}
	return key.String(string(b)), true
}
