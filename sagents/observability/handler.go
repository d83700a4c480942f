package observability

import "context"

// ChainHandler receives chain events.
//
// A start method returns the context that the run's later events and its
// children see: a handler that keeps per-run state (a span, a start time)
// stores it in the returned context and reads it back at the end, where the
// Manager passes exactly the context the start returned. Return ctx itself
// when there is nothing to add. A returned error is logged by the Manager;
// it never reaches the caller.
type ChainHandler interface {
	ChainStart(ctx context.Context, info ChainInfo) (context.Context, error)
	ChainEnd(ctx context.Context, res ChainResult) error
	ChainError(ctx context.Context, err error) error
}

// AgentHandler receives agent events.
type AgentHandler interface {
	AgentStart(ctx context.Context, info AgentInfo) (context.Context, error)
	AgentEnd(ctx context.Context, res AgentResult) error
	AgentError(ctx context.Context, err error) error
}

// LLMHandler receives model-call events.
type LLMHandler interface {
	LLMStart(ctx context.Context, req LLMRequest) (context.Context, error)
	LLMEnd(ctx context.Context, resp LLMResponse) error
	LLMError(ctx context.Context, err error) error
}

// ToolHandler receives tool-call events.
type ToolHandler interface {
	ToolStart(ctx context.Context, call ToolCall) (context.Context, error)
	ToolEnd(ctx context.Context, res ToolResult) error
	ToolError(ctx context.Context, err error) error
}

// MessageHandler receives message events.
type MessageHandler interface {
	MessageStart(ctx context.Context, msg Message) (context.Context, error)
	MessageEnd(ctx context.Context, msg Message) error
}

// Handler receives every event family. Embed [Base] to implement only some.
//
// Methods may be called concurrently for different runs. A handler that also
// implements interface{ Shutdown(context.Context) error } is shut down by
// [Manager.Shutdown].
type Handler interface {
	ChainHandler
	AgentHandler
	LLMHandler
	ToolHandler
	MessageHandler
}

// Base is a Handler whose methods do nothing. Embed it in a custom handler
// and override the methods of interest.
type Base struct{}

var _ Handler = Base{}

func (Base) ChainStart(ctx context.Context, _ ChainInfo) (context.Context, error) { return ctx, nil }
func (Base) ChainEnd(context.Context, ChainResult) error                          { return nil }
func (Base) ChainError(context.Context, error) error                              { return nil }
func (Base) AgentStart(ctx context.Context, _ AgentInfo) (context.Context, error) { return ctx, nil }
func (Base) AgentEnd(context.Context, AgentResult) error                          { return nil }
func (Base) AgentError(context.Context, error) error                              { return nil }
func (Base) LLMStart(ctx context.Context, _ LLMRequest) (context.Context, error)  { return ctx, nil }
func (Base) LLMEnd(context.Context, LLMResponse) error                            { return nil }
func (Base) LLMError(context.Context, error) error                                { return nil }
func (Base) ToolStart(ctx context.Context, _ ToolCall) (context.Context, error)   { return ctx, nil }
func (Base) ToolEnd(context.Context, ToolResult) error                            { return nil }
func (Base) ToolError(context.Context, error) error                               { return nil }
func (Base) MessageStart(ctx context.Context, _ Message) (context.Context, error) { return ctx, nil }
func (Base) MessageEnd(context.Context, Message) error                            { return nil }
