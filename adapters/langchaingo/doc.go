// Package langchaingosage connects sage to LangChainGo
// (github.com/tmc/langchaingo): a LangChainGo agent calls sage's tools,
// talks to the model through sage's llm client, and reports to sage's
// observability Manager, so that one trace holds the agent, its model
// calls, its tool calls and the sandbox operations under them.
//
// Import it as
//
//	langchaingosage "github.com/sage-go/sage/adapters/langchaingo"
//
// It is a Go module of its own: the core module pulls none of
// LangChainGo's dependencies.
//
//   - [Tools] turns every tool of a tools.Manager into a LangChainGo
//     tools.Tool. Its input is the JSON arguments object (its description
//     carries the JSON Schema); a call goes through the Manager (argument
//     validation, the command policy, result bounds, tool events) and a
//     failed call returns the JSON of its tools.Error as the observation,
//     which the model reads (an error would end the executor); only a
//     cancelled context is an error.
//   - [NewModel] is an llms.Model backed by an llm.Client: the dual
//     client's retries, probes, request sanitising, provider quirks and
//     prompt caching serve the agent. It takes tools and functions
//     (llms.WithTools, llms.WithFunctions) as OpenAI tools, streams
//     through llms.WithStreamingFunc, and returns tool calls with their
//     ids. With ModelOptions.Tools it shows the model the real JSON
//     Schema of a sage tool that an agent offers with LangChainGo's
//     one-string "__arg1" schema (the OpenAI functions agent does), so
//     the model sends the arguments object itself.
//   - [Traced] wraps a chains.Chain (an agents.Executor) so that each call
//     is an agent run of the Manager, under which the model and tool
//     events nest (LangChainGo's callbacks carry no context to nest in).
//
// An OpenAI functions agent over a sage runtime:
//
//	rt, err := sage.New(ctx, sage.Options{Model: llm.Config{Standard: ...}})
//	model := langchaingosage.NewModel(rt.Client, langchaingosage.ModelOptions{Tools: rt.Tools})
//	exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, langchaingosage.Tools(rt.Tools)))
//	answer, err := chains.Run(ctx, langchaingosage.Traced(rt.Observer, "coder", exec), task)
package langchaingosage
