// Package sage builds a whole agent runtime from one options value: the
// observability Manager, a sandbox, the model client, the tools (the
// built-ins registered) and the agent loop, with the one Observer given to
// every part, so that a traced agent is a few lines:
//
// Its API: [New] with [Options] returns a [Runtime] (or [ErrNoAgent]).
//
//	rt, err := sage.New(ctx, sage.Options{
//		Model:    llm.Config{Standard: llm.ModelConfig{BaseURL: url, Model: "gpt-4o-mini"}},
//		Handlers: []observability.Handler{observability.NewConsoleHandler(os.Stderr, observability.ConsoleOptions{})},
//	})
//	if err != nil { ... }
//	defer rt.Close(ctx)
//	res, err := rt.Run(ctx, "write fib.py, run it and report what it prints")
//
// It is the top layer of the library: it imports the agent, tools,
// sandbox, llm and observability packages (and registers the local and
// passthrough sandbox modes), and none of them imports it. The parts stay
// reachable as fields of the [Runtime], and a framework adapter
// (github.com/sage-go/sage/adapters/...) takes [Runtime.Tools] and
// [Runtime.Client] for its own agent. Anything New does can be done by
// hand with the packages below; New only wires.
//
// The zero Options runs commands in a local session sandbox (bubblewrap on
// Linux, Seatbelt on macOS) in a temporary workspace that Close removes,
// with no model: set Options.Model to get a [Runtime.Client] and a
// [Runtime.Agent].
package sage
