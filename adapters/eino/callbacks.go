package einosage

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/sage-go/sage/sagents/observability"
)

// CallbackOptions configure [Callbacks].
type CallbackOptions struct {
	// Name names the agent run of the outermost graph; empty takes the
	// graph's name (the ReAct agent's is "ReActAgent"). Nested graphs
	// are always named by their own names.
	Name string
	// SessionID is the session of the runs.
	SessionID string
}

// Callbacks returns an Eino callbacks.Handler that reports every run of a
// graph, chain or workflow as an agent run of obs (the outermost one in a
// chain of its own, as observability.Manager.StartAgent does), ended when
// the graph's output, streamed or not, is complete. The model calls and
// tool calls made inside (through [ChatModel] and [Tools]) nest under it.
// Other components are left to the events sage reports itself.
func Callbacks(obs *observability.Manager, o CallbackOptions) callbacks.Handler {
	h := &handler{obs: obs, o: o}
	return callbacks.NewHandlerBuilder().
		OnStartFn(func(ctx context.Context, info *callbacks.RunInfo, in callbacks.CallbackInput) context.Context {
			return h.start(ctx, info, inputs(in))
		}).
		OnStartWithStreamInputFn(func(ctx context.Context, info *callbacks.RunInfo, in *schema.StreamReader[callbacks.CallbackInput]) context.Context {
			in.Close()
			return h.start(ctx, info, nil)
		}).
		OnEndFn(func(ctx context.Context, info *callbacks.RunInfo, out callbacks.CallbackOutput) context.Context {
			h.end(ctx, info, outputs(out), nil)
			return ctx
		}).
		OnEndWithStreamOutputFn(func(ctx context.Context, info *callbacks.RunInfo, out *schema.StreamReader[callbacks.CallbackOutput]) context.Context {
			if !isGraph(info) {
				out.Close()
				return ctx
			}
			go h.drain(ctx, info, out)
			return ctx
		}).
		OnErrorFn(func(ctx context.Context, info *callbacks.RunInfo, err error) context.Context {
			h.end(ctx, info, nil, err)
			return ctx
		}).
		Build()
}

type handler struct {
	obs *observability.Manager
	o   CallbackOptions
}

// endKey carries the end function of the agent run a graph's start made.
type endKey struct{}

func isGraph(info *callbacks.RunInfo) bool {
	if info == nil {
		return false
	}
	switch info.Component {
	case compose.ComponentOfGraph, compose.ComponentOfChain, compose.ComponentOfWorkflow:
		return true
	}
	return false
}

func (h *handler) start(ctx context.Context, info *callbacks.RunInfo, in []observability.Message) context.Context {
	if !isGraph(info) {
		return ctx
	}
	name := info.Name
	if _, nested := ctx.Value(endKey{}).(func([]observability.Message, error)); !nested && h.o.Name != "" {
		name = h.o.Name
	}
	ctx, end := h.obs.StartAgent(ctx, observability.AgentInfo{Name: name, SessionID: h.o.SessionID, Inputs: in})
	return context.WithValue(ctx, endKey{}, end)
}

func (h *handler) end(ctx context.Context, info *callbacks.RunInfo, out []observability.Message, err error) {
	if end, ok := ctx.Value(endKey{}).(func([]observability.Message, error)); ok && isGraph(info) {
		end(out, err)
	}
}

// drain reads the graph's streamed output to its end, then ends the run
// with the text it carried.
func (h *handler) drain(ctx context.Context, info *callbacks.RunInfo, out *schema.StreamReader[callbacks.CallbackOutput]) {
	defer out.Close()
	var text strings.Builder
	for {
		c, err := out.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			h.end(ctx, info, nil, err)
			return
		}
		for _, m := range outputs(c) {
			text.WriteString(m.Content)
		}
	}
	h.end(ctx, info, []observability.Message{{Role: "assistant", Content: text.String()}}, nil)
}

// inputs and outputs read the messages of the graph runs that carry them
// (the ReAct agent takes []*schema.Message and gives *schema.Message).
func inputs(in callbacks.CallbackInput) []observability.Message {
	msgs, _ := in.([]*schema.Message)
	out := make([]observability.Message, 0, len(msgs))
	for _, m := range msgs {
		if m != nil {
			out = append(out, observed(m))
		}
	}
	return out
}

func outputs(out callbacks.CallbackOutput) []observability.Message {
	if m, ok := out.(*schema.Message); ok && m != nil {
		return []observability.Message{observed(m)}
	}
	return nil
}

func observed(m *schema.Message) observability.Message {
	o := observability.Message{Role: string(m.Role), Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		o.ToolCalls = append(o.ToolCalls, observability.ToolCallRef{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return o
}
