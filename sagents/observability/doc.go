// Package observability fans the events of agent runs out to handlers.
//
// Its API: the [Manager] ([New], [Options]) with its start and end
// methods and the events' types; [Handler] and the family interfaces a
// handler implements (embedding [Base]), [SandboxHandler] optional;
// [NewConsoleHandler]; [RunFromContext]; [ErrorType] and [ErrorTyper] for
// the low-cardinality error.type.
//
// Five event families describe a run, each with a start, an end and (except
// messages) an error:
//
//   - chain: one user turn of a session (the root of a trace);
//   - agent: one agent run inside a chain;
//   - llm: one model call;
//   - tool: one tool call;
//   - message: one message (start and end only).
//
// A start returns a [context.Context] that carries the run's identity
// ([Run]) and its nesting. The matching end or error takes that context
// back, so concurrent and nested runs never cross:
//
//	ctx = m.LLMStart(ctx, observability.LLMRequest{Model: "gpt-4o"})
//	resp, err := client.Do(ctx, req)
//	if err != nil {
//		m.LLMError(ctx, err)
//		return err
//	}
//	m.LLMEnd(ctx, observability.LLMResponse{Usage: usage})
//
// Ending a run twice is harmless (the second end is ignored), and ending a
// run also ends any of its descendants that are still open, with
// [ErrParentEnded], so an error path never leaves an open span behind.
//
// A [Manager] holds an ordered list of [Handler]s. It dispatches each event to
// every handler in registration order, recovers a handler's panic or error
// (logged through log/slog, rate-limited), and never lets one handler break
// another or the caller. A nil *Manager and a Manager without handlers are
// valid and do nothing; dispatch then costs no allocation.
//
// Custom handlers embed [Base] and override only the methods they need. The
// OpenTelemetry handler lives in the otelsage sub-package
// (github.com/sage-go/sage/sagents/observability/otelsage); [ConsoleHandler]
// prints a run tree to stderr when no collector is available. An agent loop
// reports itself with [Manager.StartAgent].
package observability
