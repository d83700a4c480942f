package einosage_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	einosage "github.com/sage-go/sage/adapters/eino"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/sage"
)

// Eino's ReAct agent with sage's tools, in a local session sandbox, and
// sage's model client; the agent's run, its model calls, its tool calls
// and their sandbox operations report to rt.Observer (register a handler,
// or run otelsage.Setup with it, to see them). The replay model stands in
// for a real one.
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
	tools, err := einosage.Tools(rt.Tools)
	if err != nil {
		log.Fatal(err)
	}
	ag, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: einosage.NewChatModel(rt.Client, einosage.ModelOptions{}),
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
	})
	if err != nil {
		log.Fatal(err)
	}
	msg, err := ag.Generate(ctx, []*schema.Message{schema.UserMessage("Write fib.py, run it and report what it prints.")},
		agent.WithComposeOptions(compose.WithCallbacks(einosage.Callbacks(rt.Observer, einosage.CallbackOptions{Name: "coder"}))))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Split(msg.Content, "\n")[2])
	// Output: first 15 Fibonacci numbers: 0 1 1 2 3 5 8 13 21 34 55 89 144 233 377
}
