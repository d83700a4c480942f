// Package agent is a small tool-calling agent loop over the llm, tools and
// observability packages.
//
// Its API: [New] with [Config] returns an [Agent], whose Run gives a
// [Result] (with its [ToolCall]s) or [ErrMaxSteps]; [TurnCheckpointer] is
// what Config.Checkpoints needs of the tools' sandbox.
//
// One [Agent.Run] is one user turn: the system prompt (with the skills
// block), the task, then model calls with the tools until the model answers
// without calling a tool or MaxSteps is reached. Assistant text is streamed
// to Config.Output as it arrives. When the model asks for several tools at
// once they run concurrently, and their results go back in the order the
// model asked.
//
// Every step is reported through Config.Observer: a chain for the turn
// (unless the context already carries a run), an agent run, a message for
// the task and for each assistant reply, and, through the llm client and the
// tools Manager given the same Observer, the model calls and the tool calls.
//
// The replay sub-package is a scripted, in-process OpenAI-compatible model
// for trying the runtime without one.
package agent
