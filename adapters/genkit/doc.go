// Package genkitsage connects sage to Genkit's Go SDK
// (github.com/firebase/genkit/go): Genkit flows call sage's tools as
// Genkit tools and may use sage's llm client as a Genkit model, and report
// to sage's observability Manager, so that one trace holds the flow, its
// model calls, its tool calls and the sandbox operations under them.
//
// Import it as
//
//	genkitsage "github.com/sage-go/sage/adapters/genkit"
//
// It is a Go module of its own: the core module pulls none of Genkit's
// dependencies.
//
//   - [DefineTools] defines every tool of a tools.Manager as a Genkit tool
//     (its input schema is the tool's JSON Schema) and returns them for
//     ai.WithTools. A call goes through the Manager (argument validation,
//     the command policy, result bounds, tool events); a failed call
//     returns the JSON of its tools.Error as the tool's output, which the
//     model reads (an error would end the generation); only a cancelled
//     context is an error.
//   - [DefineModel] defines a Genkit model backed by an llm.Client: the
//     dual client's retries, probes, request sanitising, provider quirks
//     and prompt caching serve the flow. It takes tools, multi-turn
//     conversations, system messages, media URLs and streaming.
//   - [Traced] wraps a flow's function so that each run is an agent run of
//     the Manager, under which the model and tool events nest. Genkit's
//     own spans go to the global OpenTelemetry TracerProvider; with
//     otelsage.Setup making that the one sage exports to, the flow's span
//     is the root of the same trace.
//
// A flow over a sage runtime:
//
//	rt, err := sage.New(ctx, sage.Options{Model: llm.Config{Standard: ...}})
//	g := genkit.Init(ctx)
//	model := genkitsage.DefineModel(g, "sage/standard", rt.Client, genkitsage.ModelOptions{})
//	tools := genkitsage.DefineTools(g, rt.Tools)
//	flow := genkit.DefineFlow(g, "coder", genkitsage.Traced(rt.Observer, "coder",
//		func(ctx context.Context, task string) (string, error) {
//			return genkit.GenerateText(ctx, g, ai.WithModel(model), ai.WithTools(tools...), ai.WithPrompt(task))
//		}))
//	answer, err := flow.Run(ctx, task)
package genkitsage
