package llm_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
)

// calls is a handler that prints each finished model call: the hook
// every tracing handler (otelsage, the console tree) uses.
type calls struct{ observability.Base }

func (calls) LLMEnd(ctx context.Context, r observability.LLMResponse) error {
	run, _ := observability.RunFromContext(ctx)
	fmt.Printf("traced: chat %s finish=%s\n", run.Name, strings.Join(r.FinishReasons, ","))
	return nil
}

// The model client with tracing: one chat call to an OpenAI-compatible
// server (here the replay model), reported to the Manager given as
// Observer. A request is built from llm's own names; go-openai's types
// are the same ones.
func Example() {
	ctx := context.Background()
	model, err := replay.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()

	obs := observability.New(observability.Options{Handlers: []observability.Handler{calls{}}})
	client, err := llm.New(llm.Config{
		Standard: llm.ModelConfig{BaseURL: model.URL, Model: replay.Model}, // APIKey: "sk-...", for a real server
		Observer: obs,
	})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Chat(ctx, llm.NewRequest(llm.SystemMessage("You write Python."), llm.UserMessage("Write fib.py.")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Split(resp.Content(), "\n")[1])
	fmt.Println("tool call:", resp.Choices[0].ToolCalls[0].Name, "tokens:", resp.Usage.Input > 0)
	// Output:
	// traced: chat sage-replay finish=tool_calls
	// First, write fib.py.
	// tool call: file_write tokens: true
}
