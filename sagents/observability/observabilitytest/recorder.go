package observabilitytest

import (
	"context"
	"sync"

	"github.com/sage-go/sage/sagents/observability"
)

// Event is one event a Recorder was given.
type Event struct {
	// Op is the handler method: "ChainStart", "LLMEnd", "SandboxError"...
	Op string
	// Run is the run the event belongs to (its Kind, Name, IDs).
	Run observability.Run
	// Data is the event's argument: an observability.ChainInfo,
	// LLMRequest, LLMResponse, ToolCall, SandboxOp, SandboxResult...; nil
	// for an error event.
	Data any
	// Err is the error of an error event.
	Err error
}

// Recorder is a Handler (and SandboxHandler) that keeps every event. It is
// safe for concurrent use; its methods never fail.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

var (
	_ observability.Handler        = (*Recorder)(nil)
	_ observability.SandboxHandler = (*Recorder)(nil)
)

// Events returns a copy of the events so far, in the order they came.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Data returns, in order, the Data of the events whose Op is op, as T
// (those of another type are left out).
func Data[T any](r *Recorder, op string) []T {
	var out []T
	for _, e := range r.Events() {
		if v, ok := e.Data.(T); ok && e.Op == op {
			out = append(out, v)
		}
	}
	return out
}

// Errs returns, in order, the errors of the events whose Op is op.
func (r *Recorder) Errs(op string) []error {
	var out []error
	for _, e := range r.Events() {
		if e.Op == op {
			out = append(out, e.Err)
		}
	}
	return out
}

func (r *Recorder) add(ctx context.Context, op string, data any, err error) {
	run, _ := observability.RunFromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Op: op, Run: run, Data: data, Err: err})
}

func (r *Recorder) start(ctx context.Context, op string, data any) (context.Context, error) {
	r.add(ctx, op, data, nil)
	return ctx, nil
}

func (r *Recorder) end(ctx context.Context, op string, data any) error {
	r.add(ctx, op, data, nil)
	return nil
}

func (r *Recorder) fail(ctx context.Context, op string, err error) error {
	r.add(ctx, op, nil, err)
	return nil
}

// ChainStart records the event.
func (r *Recorder) ChainStart(ctx context.Context, info observability.ChainInfo) (context.Context, error) {
	return r.start(ctx, "ChainStart", info)
}

// ChainEnd records the event.
func (r *Recorder) ChainEnd(ctx context.Context, res observability.ChainResult) error {
	return r.end(ctx, "ChainEnd", res)
}

// ChainError records the event.
func (r *Recorder) ChainError(ctx context.Context, err error) error {
	return r.fail(ctx, "ChainError", err)
}

// AgentStart records the event.
func (r *Recorder) AgentStart(ctx context.Context, info observability.AgentInfo) (context.Context, error) {
	return r.start(ctx, "AgentStart", info)
}

// AgentEnd records the event.
func (r *Recorder) AgentEnd(ctx context.Context, res observability.AgentResult) error {
	return r.end(ctx, "AgentEnd", res)
}

// AgentError records the event.
func (r *Recorder) AgentError(ctx context.Context, err error) error {
	return r.fail(ctx, "AgentError", err)
}

// LLMStart records the event.
func (r *Recorder) LLMStart(ctx context.Context, req observability.LLMRequest) (context.Context, error) {
	return r.start(ctx, "LLMStart", req)
}

// LLMEnd records the event.
func (r *Recorder) LLMEnd(ctx context.Context, resp observability.LLMResponse) error {
	return r.end(ctx, "LLMEnd", resp)
}

// LLMError records the event.
func (r *Recorder) LLMError(ctx context.Context, err error) error {
	return r.fail(ctx, "LLMError", err)
}

// ToolStart records the event.
func (r *Recorder) ToolStart(ctx context.Context, call observability.ToolCall) (context.Context, error) {
	return r.start(ctx, "ToolStart", call)
}

// ToolEnd records the event.
func (r *Recorder) ToolEnd(ctx context.Context, res observability.ToolResult) error {
	return r.end(ctx, "ToolEnd", res)
}

// ToolError records the event.
func (r *Recorder) ToolError(ctx context.Context, err error) error {
	return r.fail(ctx, "ToolError", err)
}

// MessageStart records the event.
func (r *Recorder) MessageStart(ctx context.Context, msg observability.Message) (context.Context, error) {
	return r.start(ctx, "MessageStart", msg)
}

// MessageEnd records the event.
func (r *Recorder) MessageEnd(ctx context.Context, msg observability.Message) error {
	return r.end(ctx, "MessageEnd", msg)
}

// SandboxStart records the event.
func (r *Recorder) SandboxStart(ctx context.Context, op observability.SandboxOp) (context.Context, error) {
	return r.start(ctx, "SandboxStart", op)
}

// SandboxEnd records the event.
func (r *Recorder) SandboxEnd(ctx context.Context, res observability.SandboxResult) error {
	return r.end(ctx, "SandboxEnd", res)
}

// SandboxError records the event.
func (r *Recorder) SandboxError(ctx context.Context, err error) error {
	return r.fail(ctx, "SandboxError", err)
}
