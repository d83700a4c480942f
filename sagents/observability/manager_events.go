package observability

import (
	"context"
)

// ---- the events ----

// startEvent starts a run of kind (see start) whose handlers get
// ev(h, ctx, arg); without handlers it returns ctx and allocates nothing.
func startEvent[T any](m *Manager, ctx context.Context, kind Kind, name, session, op string,
	ev func(Handler, context.Context, T) (context.Context, error), arg T) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, kind, name, session, op,
		func(h Handler, c context.Context) (context.Context, error) { return ev(h, c, arg) })
}

// endEvent ends the run of kind that ctx carries (see end); its handlers
// get ev(h, ctx, arg).
func endEvent[T any](m *Manager, ctx context.Context, kind Kind, op string, ev func(Handler, context.Context, T) error, arg T) {
	m.end(ctx, kind, op, func(h Handler, c context.Context) error { return ev(h, c, arg) })
}

// ChainStart starts a chain (one user turn) and returns the context that
// carries it. Pass that context to ChainEnd or ChainError.
func (m *Manager) ChainStart(ctx context.Context, info ChainInfo) context.Context {
	return startEvent(m, ctx, KindChain, info.Name, info.SessionID, "ChainStart", Handler.ChainStart, info)
}

// ChainEnd ends the chain carried by ctx.
func (m *Manager) ChainEnd(ctx context.Context, res ChainResult) {
	endEvent(m, ctx, KindChain, "ChainEnd", Handler.ChainEnd, res)
}

// ChainError ends the chain carried by ctx with an error.
func (m *Manager) ChainError(ctx context.Context, err error) {
	m.fail(ctx, KindChain, "ChainError", err)
}

// AgentStart starts an agent run and returns the context that carries it.
func (m *Manager) AgentStart(ctx context.Context, info AgentInfo) context.Context {
	return startEvent(m, ctx, KindAgent, info.Name, info.SessionID, "AgentStart", Handler.AgentStart, info)
}

// AgentEnd ends the agent run carried by ctx.
func (m *Manager) AgentEnd(ctx context.Context, res AgentResult) {
	endEvent(m, ctx, KindAgent, "AgentEnd", Handler.AgentEnd, res)
}

// AgentError ends the agent run carried by ctx with an error.
func (m *Manager) AgentError(ctx context.Context, err error) {
	m.fail(ctx, KindAgent, "AgentError", err)
}

// LLMStart starts a model call and returns the context that carries it.
func (m *Manager) LLMStart(ctx context.Context, req LLMRequest) context.Context {
	return startEvent(m, ctx, KindLLM, req.Model, req.SessionID, "LLMStart", Handler.LLMStart, req)
}

// LLMEnd ends the model call carried by ctx.
func (m *Manager) LLMEnd(ctx context.Context, resp LLMResponse) {
	endEvent(m, ctx, KindLLM, "LLMEnd", Handler.LLMEnd, resp)
}

// LLMError ends the model call carried by ctx with an error.
func (m *Manager) LLMError(ctx context.Context, err error) {
	m.fail(ctx, KindLLM, "LLMError", err)
}

// ToolStart starts a tool call and returns the context that carries it.
func (m *Manager) ToolStart(ctx context.Context, call ToolCall) context.Context {
	return startEvent(m, ctx, KindTool, call.Name, call.SessionID, "ToolStart", Handler.ToolStart, call)
}

// ToolEnd ends the tool call carried by ctx.
func (m *Manager) ToolEnd(ctx context.Context, res ToolResult) {
	endEvent(m, ctx, KindTool, "ToolEnd", Handler.ToolEnd, res)
}

// ToolError ends the tool call carried by ctx with an error.
func (m *Manager) ToolError(ctx context.Context, err error) {
	m.fail(ctx, KindTool, "ToolError", err)
}

// MessageStart starts a message (for example a streamed assistant message)
// and returns the context that carries it.
func (m *Manager) MessageStart(ctx context.Context, msg Message) context.Context {
	return startEvent(m, ctx, KindMessage, msg.Role, "", "MessageStart", Handler.MessageStart, msg)
}

// MessageEnd ends the message carried by ctx.
func (m *Manager) MessageEnd(ctx context.Context, msg Message) {
	endEvent(m, ctx, KindMessage, "MessageEnd", Handler.MessageEnd, msg)
}
