// Package einosage connects sage to CloudWeGo Eino
// (github.com/cloudwego/eino): an Eino agent calls sage's tools, talks to
// the model through sage's llm client, and reports to sage's observability
// Manager, so that one trace holds the Eino agent, its model calls, its
// tool calls and the sandbox operations under them.
//
// Import it as
//
//	einosage "github.com/sage-go/sage/adapters/eino"
//
// It is a Go module of its own: the core module pulls none of Eino's
// dependencies.
//
//   - [Tools] turns every tool of a tools.Manager into an Eino
//     tool.InvokableTool for compose.ToolsNodeConfig. A call goes through
//     the Manager (argument validation, the command policy, result bounds,
//     tool events); a failed call returns the JSON of its tools.Error as
//     the result, which the model reads, as sage's own agent does (an
//     error would end Eino's graph run); only a cancelled context is an
//     error.
//   - [NewChatModel] is an Eino model.ToolCallingChatModel backed by an
//     llm.Client: the dual client's retries, probes, request sanitising,
//     provider quirks and prompt caching (leading system messages and the
//     tool list are marked stable) serve the Eino agent. Generate and
//     Stream both work; Stream sends text as it arrives and the assembled
//     tool calls in its last message, so give the ReAct agent
//     [StreamToolCallChecker] when it streams.
//   - [Callbacks] is an Eino callbacks.Handler that reports each run of a
//     graph, chain or workflow (the ReAct agent is one) as an agent run of
//     the Manager: the model and tool events made inside nest under it.
//     Give it with compose.WithCallbacks (react: agent.WithComposeOptions).
//
// A ReAct agent over a sage runtime:
//
//	rt, err := sage.New(ctx, sage.Options{Model: llm.Config{Standard: ...}})
//	tools, err := einosage.Tools(rt.Tools)
//	ag, err := react.NewAgent(ctx, &react.AgentConfig{
//		ToolCallingModel: einosage.NewChatModel(rt.Client, einosage.ModelOptions{}),
//		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
//	})
//	msg, err := ag.Generate(ctx, []*schema.Message{schema.UserMessage(task)},
//		agent.WithComposeOptions(compose.WithCallbacks(einosage.Callbacks(rt.Observer, einosage.CallbackOptions{}))))
package einosage
