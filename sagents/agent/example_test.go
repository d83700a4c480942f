package agent_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/tools"
)

// The agent loop wired by hand: what sage.New does from one Options value
// (the Observer given to each part, the built-in tools registered). Use
// this when a part is built elsewhere, for example a sandbox a provider
// hands out.
func Example() {
	ctx := context.Background()
	model, err := replay.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	dir, err := os.MkdirTemp("", "sage-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	obs := observability.New(observability.Options{Handlers: []observability.Handler{observability.NewConsoleHandler(os.Stderr, observability.ConsoleOptions{})}})
	defer obs.Shutdown(ctx)
	client, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: model.URL, Model: replay.Model}, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Local, Workspace: dir, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)
	tm := tools.NewManager(sb, tools.Options{Observer: obs})
	if err := tm.RegisterBuiltins(tools.BuiltinOptions{}); err != nil {
		log.Fatal(err)
	}
	a, err := agent.New(agent.Config{Client: client, Tools: tm, Observer: obs, SessionID: "example"})
	if err != nil {
		log.Fatal(err)
	}
	res, err := a.Run(ctx, "Write fib.py, run it and report what it prints.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d model calls, %d tool calls\n", res.Steps, len(res.ToolCalls))
	for _, c := range res.ToolCalls {
		fmt.Println(c.Step, c.Name)
	}
	// Output:
	// 4 model calls, 4 tool calls
	// 1 file_write
	// 2 execute_shell_command
	// 3 file_read
	// 3 list_dir
}
