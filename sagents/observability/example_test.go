package observability_test

import (
	"context"
	"fmt"

	"github.com/sage-go/sage/sagents/observability"
)

// toolLog is a handler of its own: it embeds Base and overrides the
// events it wants.
type toolLog struct{ observability.Base }

func (toolLog) ToolEnd(ctx context.Context, r observability.ToolResult) error {
	run, _ := observability.RunFromContext(ctx)
	fmt.Printf("tool %s (session %s) returned %q\n", run.Name, run.SessionID, r.Result)
	return nil
}

func (toolLog) AgentEnd(ctx context.Context, r observability.AgentResult) error {
	run, _ := observability.RunFromContext(ctx)
	fmt.Printf("agent %s answered %q\n", run.Name, r.Outputs[0].Content)
	return nil
}

// An agent loop of your own (or a framework's) reports its run with
// StartAgent; the tool and model calls made with its context nest under
// it and inherit its session.
func ExampleManager_StartAgent() {
	m := observability.New(observability.Options{Handlers: []observability.Handler{toolLog{}}})
	ctx, end := m.StartAgent(context.Background(), observability.AgentInfo{Name: "coder", SessionID: "s1"})

	tctx := m.ToolStart(ctx, observability.ToolCall{Name: "list_dir", CallID: "c1"})
	m.ToolEnd(tctx, observability.ToolResult{Result: "fib.py"})

	end([]observability.Message{{Role: "assistant", Content: "done"}}, nil)
	// Output:
	// tool list_dir (session s1) returned "fib.py"
	// agent coder answered "done"
}
