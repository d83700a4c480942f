package otelsage

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// ---- chain ----

// ChainStart starts a chain run. Its span starts with its first child
// (backdated to now); see [workflow] for when it is an invoke_workflow
// span.
func (h *Handler) ChainStart(ctx context.Context, i observability.ChainInfo) (context.Context, error) {
	st := &spanState{op: opInvokeWorkflow}
	w := &workflow{parent: ctx, name: i.Name}
	if r, ok := observability.RunFromContext(ctx); ok {
		w.session = r.SessionID
	}
	if a, ok := h.messagesAttr(attrInputMessages, i.Inputs); ok {
		w.inputs = append(w.inputs, a)
	}
	prepare(ctx, st, nil)
	w.start = st.start
	st.wf = w
	return context.WithValue(ctx, stateKey{}, st), nil
}

// ChainEnd ends the chain span.
func (h *Handler) ChainEnd(ctx context.Context, r observability.ChainResult) error {
	ctx, promoted, ok := h.ending(ctx)
	if !ok {
		return nil
	}
	if a, ok := h.messagesAttr(attrOutputMessages, r.Outputs); ok && promoted {
		h.end(ctx, a)
	} else {
		h.end(ctx)
	}
	return nil
}

// ChainError ends the chain span with an error.
func (h *Handler) ChainError(ctx context.Context, err error) error {
	if ctx, _, ok := h.ending(ctx); ok {
		h.fail(ctx, err)
	}
	return nil
}

// ---- agent ----

// AgentStart starts an invoke_agent span, with the agent's provider and
// model when the event names them (else its first model call's, at its
// end). Its end adds the response model, the last call's finish reasons
// and the token totals of the model calls made under it.
func (h *Handler) AgentStart(ctx context.Context, i observability.AgentInfo) (context.Context, error) {
	attrs := []attribute.KeyValue{attrOperationName.String(opInvokeAgent)}
	totals := &agentTotals{name: i.Name, provider: i.Provider, model: i.Model}
	st := &spanState{op: opInvokeAgent, agent: totals}
	if i.Name != "" {
		attrs = append(attrs, attrAgentName.String(i.Name))
	}
	if i.Provider != "" && !h.latest {
		attrs = append(attrs, attrProviderName.String(i.Provider))
	}
	if i.Model != "" {
		attrs = append(attrs, attrRequestModel.String(i.Model))
	}
	if i.Step != "" {
		attrs = append(attrs, attrStepName.String(i.Step))
	}
	if a, ok := h.messagesAttr(attrInputMessages, i.Inputs); ok {
		attrs = append(attrs, a)
	}
	ctx = h.begin(ctx, i.Name, trace.SpanKindInternal, st, attrs...)
	return context.WithValue(ctx, agentKey{}, totals), nil
}

func (h *Handler) agentAttrs(ctx context.Context) []attribute.KeyValue {
	if st := stateOf(ctx); st != nil && st.agent != nil {
		return st.agent.attrs(h.latest)
	}
	return nil
}

// AgentEnd ends the agent span.
func (h *Handler) AgentEnd(ctx context.Context, r observability.AgentResult) error {
	attrs := h.agentAttrs(ctx)
	if a, ok := h.messagesAttr(attrOutputMessages, r.Outputs); ok {
		attrs = append(attrs, a)
	}
	h.end(ctx, attrs...)
	return nil
}

// AgentError ends the agent span with an error.
func (h *Handler) AgentError(ctx context.Context, err error) error {
	h.fail(ctx, err, h.agentAttrs(ctx)...)
	return nil
}

// ---- tool ----

// ToolStart starts an "execute_tool {tool}" span.
func (h *Handler) ToolStart(ctx context.Context, c observability.ToolCall) (context.Context, error) {
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		attrOperationName.String(opExecuteTool),
		attrToolName.String(c.Name),
		attrToolType.String("function"),
	)
	if c.Description != "" {
		attrs = append(attrs, attrToolDescription.String(h.truncate(c.Description)))
	}
	if c.CallID != "" {
		attrs = append(attrs, attrToolCallID.String(c.CallID))
	}
	if h.capture.Spans() && c.Arguments != "" {
		attrs = append(attrs, attrToolCallArguments.String(h.truncate(c.Arguments)))
	}
	ts := &toolState{name: c.Name}
	if a := nearestAgent(ctx); a != nil {
		ts.totals = a
		ts.agent = a.name
		a.mu.Lock()
		a.toolCalls++
		a.mu.Unlock()
		if h.latest && a.name != "" {
			attrs = append(attrs, attrAgentName.String(a.name))
		}
	}
	return h.begin(ctx, c.Name, trace.SpanKindInternal, &spanState{op: opExecuteTool, tool: ts}, attrs...), nil
}

// ToolEnd ends the tool span.
func (h *Handler) ToolEnd(ctx context.Context, r observability.ToolResult) error {
	if h.capture.Spans() && r.Result != "" {
		h.end(ctx, attrToolCallResult.String(h.truncate(r.Result)))
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
