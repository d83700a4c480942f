package sage_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sage"
)

// A traced agent: a local session sandbox in a temporary workspace, the
// model client, the built-in tools and the agent loop, every step
// reported to one Manager (here the console tree on stderr; see
// Example_openTelemetry for OTLP). The replay model stands in for a real
// one: give your server's BaseURL, APIKey and Model instead.
func Example() {
	ctx := context.Background()
	model, err := replay.Start() // a scripted OpenAI-compatible model
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()

	rt, err := sage.New(ctx, sage.Options{
		Model:    llm.Config{Standard: llm.ModelConfig{BaseURL: model.URL, Model: replay.Model}},
		Handlers: []observability.Handler{observability.NewConsoleHandler(os.Stderr, observability.ConsoleOptions{})},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	res, err := rt.Run(ctx, "Write a Python script that prints Fibonacci numbers, run it and report the output.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Answer)
	// Output:
	// [replay] Done. I wrote fib.py, ran it with python3 in the sandbox and read its output file fib_output.txt:
	//
	// first 15 Fibonacci numbers: 0 1 1 2 3 5 8 13 21 34 55 89 144 233 377
	// sum: 986
	// Both files are in the workspace. (This answer was replayed from a fixed script; point --model at a real model to do real work.)
}
