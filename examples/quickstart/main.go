// Command quickstart is the README's traced agent: sage.New wires a local session
// sandbox, the model client, the built-in tools and the agent, one Observer
// for all, and the console handler prints the trace. It reads the model from
// OPENAI_BASE_URL, OPENAI_API_KEY and SAGE_MODEL.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sage"
)

func main() {
	ctx := context.Background()
	rt, err := sage.New(ctx, sage.Options{
		Model:    llm.Config{Standard: llm.ModelConfig{BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"), Model: os.Getenv("SAGE_MODEL")}},
		Handlers: []observability.Handler{observability.NewConsoleHandler(os.Stderr, observability.ConsoleOptions{})},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := rt.Run(ctx, "Write fib.py, run it and report what it prints.")
	rt.Close(ctx) // stops the sandbox, removes its temporary workspace, flushes the trace
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Answer)
}
