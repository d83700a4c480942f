package otelsage

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

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
