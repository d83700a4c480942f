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
	r := m.claim(ctx, KindChain, "ChainEnd")
	if r == nil {
		return
	}
	for _, h := range r.handlers {
		m.safeEnd(h, "ChainEnd", func() error { return h.ChainEnd(r.hctx, res) })
	}
	r.unlink()
}

// ChainError ends the chain carried by ctx with an error.
func (m *Manager) ChainError(ctx context.Context, err error) {
	if r := m.claim(ctx, KindChain, "ChainError"); r != nil {
		m.dispatchError(r, orUnknown(err))
	}
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
	r := m.claim(ctx, KindAgent, "AgentEnd")
	if r == nil {
		return
	}
	for _, h := range r.handlers {
		m.safeEnd(h, "AgentEnd", func() error { return h.AgentEnd(r.hctx, res) })
	}
	r.unlink()
}

// AgentError ends the agent run carried by ctx with an error.
func (m *Manager) AgentError(ctx context.Context, err error) {
	if r := m.claim(ctx, KindAgent, "AgentError"); r != nil {
		m.dispatchError(r, orUnknown(err))
	}
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
	r := m.claim(ctx, KindLLM, "LLMEnd")
	if r == nil {
		return
	}
	for _, h := range r.handlers {
		m.safeEnd(h, "LLMEnd", func() error { return h.LLMEnd(r.hctx, resp) })
	}
	r.unlink()
}

// LLMError ends the model call carried by ctx with an error.
func (m *Manager) LLMError(ctx context.Context, err error) {
	if r := m.claim(ctx, KindLLM, "LLMError"); r != nil {
		m.dispatchError(r, orUnknown(err))
	}
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
	r := m.claim(ctx, KindTool, "ToolEnd")
	if r == nil {
		return
	}
	for _, h := range r.handlers {
		m.safeEnd(h, "ToolEnd", func() error { return h.ToolEnd(r.hctx, res) })
	}
	r.unlink()
}

// ToolError ends the tool call carried by ctx with an error.
func (m *Manager) ToolError(ctx context.Context, err error) {
	if r := m.claim(ctx, KindTool, "ToolError"); r != nil {
		m.dispatchError(r, orUnknown(err))
	}
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
	r := m.claim(ctx, KindMessage, "MessageEnd")
	if r == nil {
		return
	}
	for _, h := range r.handlers {
		m.safeEnd(h, "MessageEnd", func() error { return h.MessageEnd(r.hctx, msg) })
	}
	r.unlink()
}
