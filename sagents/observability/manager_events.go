package observability

import (
	"context"
)

// ---- the events ----

// ChainStart starts a chain (one user turn) and returns the context that
// carries it. Pass that context to ChainEnd or ChainError.
func (m *Manager) ChainStart(ctx context.Context, info ChainInfo) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindChain, info.Name, info.SessionID, "ChainStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.ChainStart(c, info) })
}

// ChainEnd ends the chain carried by ctx.
func (m *Manager) ChainEnd(ctx context.Context, res ChainResult) {
	m.end(ctx, KindChain, "ChainEnd", func(h Handler, c context.Context) error { return h.ChainEnd(c, res) })
}

// ChainError ends the chain carried by ctx with an error.
func (m *Manager) ChainError(ctx context.Context, err error) {
	m.fail(ctx, KindChain, "ChainError", err)
}

// AgentStart starts an agent run and returns the context that carries it.
func (m *Manager) AgentStart(ctx context.Context, info AgentInfo) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindAgent, info.Name, info.SessionID, "AgentStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.AgentStart(c, info) })
}

// AgentEnd ends the agent run carried by ctx.
func (m *Manager) AgentEnd(ctx context.Context, res AgentResult) {
	m.end(ctx, KindAgent, "AgentEnd", func(h Handler, c context.Context) error { return h.AgentEnd(c, res) })
}

// AgentError ends the agent run carried by ctx with an error.
func (m *Manager) AgentError(ctx context.Context, err error) {
	m.fail(ctx, KindAgent, "AgentError", err)
}

// LLMStart starts a model call and returns the context that carries it.
func (m *Manager) LLMStart(ctx context.Context, req LLMRequest) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindLLM, req.Model, req.SessionID, "LLMStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.LLMStart(c, req) })
}

// LLMEnd ends the model call carried by ctx.
func (m *Manager) LLMEnd(ctx context.Context, resp LLMResponse) {
	m.end(ctx, KindLLM, "LLMEnd", func(h Handler, c context.Context) error { return h.LLMEnd(c, resp) })
}

// LLMError ends the model call carried by ctx with an error.
func (m *Manager) LLMError(ctx context.Context, err error) {
	m.fail(ctx, KindLLM, "LLMError", err)
}

// ToolStart starts a tool call and returns the context that carries it.
func (m *Manager) ToolStart(ctx context.Context, call ToolCall) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindTool, call.Name, call.SessionID, "ToolStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.ToolStart(c, call) })
}

// ToolEnd ends the tool call carried by ctx.
func (m *Manager) ToolEnd(ctx context.Context, res ToolResult) {
	m.end(ctx, KindTool, "ToolEnd", func(h Handler, c context.Context) error { return h.ToolEnd(c, res) })
}

// ToolError ends the tool call carried by ctx with an error.
func (m *Manager) ToolError(ctx context.Context, err error) {
	m.fail(ctx, KindTool, "ToolError", err)
}

// MessageStart starts a message (for example a streamed assistant message)
// and returns the context that carries it.
func (m *Manager) MessageStart(ctx context.Context, msg Message) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindMessage, msg.Role, "", "MessageStart",
		func(h Handler, c context.Context) (context.Context, error) { return h.MessageStart(c, msg) })
}

// MessageEnd ends the message carried by ctx.
func (m *Manager) MessageEnd(ctx context.Context, msg Message) {
	m.end(ctx, KindMessage, "MessageEnd", func(h Handler, c context.Context) error { return h.MessageEnd(c, msg) })
}
