package langchaingosage_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"

	langchaingosage "github.com/sage-go/sage/adapters/langchaingo"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/sage"
)

// LangChainGo's OpenAI functions agent and executor with sage's tools, in
// a local session sandbox, and sage's model client; Traced makes each
// executor call an agent run of rt.Observer, over its model calls, tool
// calls and their sandbox operations. The replay model stands in for a
// real one.
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
	lm := langchaingosage.NewModel(rt.Client, langchaingosage.ModelOptions{Tools: rt.Tools})
	exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(lm, langchaingosage.Tools(rt.Tools)))
	answer, err := chains.Run(ctx, langchaingosage.Traced(rt.Observer, "coder", exec), "Write fib.py, run it and report what it prints.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Split(answer, "\n")[2])
	// Output: first 15 Fibonacci numbers: 0 1 1 2 3 5 8 13 21 34 55 89 144 233 377
}
