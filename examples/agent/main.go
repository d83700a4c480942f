// Command agent links the sagents library into a program: a passthrough
// sandbox in a temporary directory, the scripted replay model, the built-in
// tools and the console trace. Replace the replay with your model's base URL
// and name to do real work.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/tools"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	obs := observability.New(observability.Options{Handlers: []observability.Handler{observability.NewConsoleHandler(os.Stderr, observability.ConsoleOptions{})}})

	model, err := replay.Start() // a labelled replay; no model needed
	if err != nil {
		return err
	}
	defer model.Close()
	client, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: model.URL, Model: replay.Model}, Observer: obs})
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "sage-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	h, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: dir, Observer: obs})
	if err != nil {
		return err
	}
	defer h.Close(ctx)

	tm := tools.NewManager(h, tools.Options{Observer: obs})
	if err := tm.Register(tools.Builtins(tools.BuiltinOptions{})...); err != nil {
		return err
	}
	a, err := agent.New(agent.Config{Client: client, Tools: tm, Observer: obs, SessionID: "example", Output: os.Stdout})
	if err != nil {
		return err
	}
	res, err := a.Run(ctx, "Write a Python script that prints Fibonacci numbers, run it and report the output.")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d steps, %d tool calls\n", res.Steps, len(res.ToolCalls))
	return nil
}
