package genkitsage_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	genkitsage "github.com/sage-go/sage/adapters/genkit"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/sage"
)

// A Genkit flow with sage's tools, in a local session sandbox, and sage's
// model client as a Genkit model; Traced makes each run of the flow an
// agent run of rt.Observer, over its model calls, tool calls and their
// sandbox operations. The replay model stands in for a real one.
func Example() {
	ctx := context.Background()
	model, err := replay.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()

	rt, err := sage.New(ctx, sage.Options{Model: llm.Config{Standard: llm.ModelConfig{BaseURL: model.URL, Model: replay.Model}}})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	g := genkit.Init(ctx)
	m := genkitsage.DefineModel(g, "sage/standard", rt.Client, genkitsage.ModelOptions{})
	tools := genkitsage.DefineTools(g, rt.Tools)
	coder := genkit.DefineFlow(g, "coder", genkitsage.Traced(rt.Observer, "coder", func(ctx context.Context, task string) (string, error) {
		return genkit.GenerateText(ctx, g, ai.WithModel(m), ai.WithTools(tools...), ai.WithPrompt(task))
	}))
	answer, err := coder.Run(ctx, "Write fib.py, run it and report what it prints.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Split(answer, "\n")[2])
	// Output: first 15 Fibonacci numbers: 0 1 1 2 3 5 8 13 21 34 55 89 144 233 377
}
