package observability

import "context"

// StartAgent starts the agent run info describes and returns the context
// that carries it, with the function that ends it. When ctx carries no run
// yet, the agent is the whole of a user turn: a chain of the same name and
// session starts first, and end ends it too. end reports outputs when err
// is nil and err otherwise; calling it again is harmless.
//
// It is how an agent loop, sagents' own or a framework's adapter, reports
// itself, so that the model calls and tool calls made with the returned
// context nest under it in one trace.
func (m *Manager) StartAgent(ctx context.Context, info AgentInfo) (context.Context, func(outputs []Message, err error)) {
	chain := false
	if _, ok := RunFromContext(ctx); !ok {
		ctx = m.ChainStart(ctx, ChainInfo{SessionID: info.SessionID, Name: info.Name, Inputs: info.Inputs})
		_, chain = RunFromContext(ctx)
	}
	ctx = m.AgentStart(ctx, info)
	return ctx, func(outputs []Message, err error) {
		if err != nil {
			m.AgentError(ctx, err)
		} else {
			m.AgentEnd(ctx, AgentResult{Outputs: outputs})
		}
		if !chain {
			return
		}
		// ctx is the agent's: the chain is its parent, which Chain* find
		// by kind.
		if err != nil {
			m.ChainError(ctx, err)
		} else {
			m.ChainEnd(ctx, ChainResult{Outputs: outputs})
		}
	}
}
