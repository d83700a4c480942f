// Package sagetest is the kit that tests an agent framework's adapter of
// sage (or any program that drives sage's tools and model client): an
// [Env] holds a [sage.Runtime] over a local session sandbox, the scripted
// replay model (package replay) as the model, and two views of every event
// the runtime reports: an [observabilitytest.Recorder] and OpenTelemetry
// spans (the otelsage handler over an in-memory span recorder).
//
// The test gives [Task] to the framework's own agent, built on
// Env.Runtime.Tools and Env.Runtime.Client, and calls [Env.Check] with the
// agent's name and answer. Check asserts what the replay's plan makes the
// agent do (fib.py written, run with python3 in the sandbox, its output
// read back into the answer) and the shape of the trace: one tree whose
// agent run holds the four model calls and the four tool calls, each tool
// holding the sandbox operations it made, the same in the spans, all in
// one OpenTelemetry trace. [Env.Problems] returns the same findings
// without failing a test.
package sagetest
