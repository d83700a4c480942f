package sagetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/observability/otelsage"
	"github.com/sage-go/sage/sagents/sage"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Task is what the agent under test is asked; the replay model plays its
// plan whatever the task says.
const Task = "Write a Python script that prints Fibonacci numbers, run it and report the output."

// fibOutput is the line fib.py prints first.
const fibOutput = "first 15 Fibonacci numbers: 0 1 1 2 3 5 8 13 21 34 55 89 144 233 377"

// Env is one runtime under test and what it reported.
type Env struct {
	// Runtime is the sage runtime: its Tools and Client are what the
	// framework's agent is built on.
	Runtime *sage.Runtime
	// Recorder keeps every observability event.
	Recorder *observabilitytest.Recorder
	// Spans keeps every OpenTelemetry span of TracerProvider, which the
	// otelsage handler reports to (a framework that traces with the
	// global provider can be given it too).
	Spans          *tracetest.SpanRecorder
	TracerProvider *sdktrace.TracerProvider
	// Model is the replay model.
	Model *replay.Server
	// Workspace is the sandbox's workspace on the host.
	Workspace string
}

// New starts an Env: the replay model, a local session sandbox (bwrap
// and python3 are required; see internal/testenv), and a Runtime with the
// built-in tools whose Manager reports to the Recorder and, through
// otelsage, to Spans. mutate, when not nil, may change the options
// before New builds them. Everything is closed when t ends.
func New(t testing.TB, mutate func(*sage.Options)) *Env {
	t.Helper()
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3)")
	e := &Env{Recorder: &observabilitytest.Recorder{}, Spans: tracetest.NewSpanRecorder()}
	e.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.Spans))
	t.Cleanup(func() { e.TracerProvider.Shutdown(context.Background()) })
	otel, err := otelsage.NewHandler(otelsage.HandlerOptions{TracerProvider: e.TracerProvider})
	if err != nil {
		t.Fatal(err)
	}
	if e.Model, err = replay.Start(); err != nil {
		t.Fatal(err)
	}
	e.Model.ChunkDelay = 0
	t.Cleanup(func() { e.Model.Close() })

	e.Workspace = sandboxtest.TempDir(t)
	o := sage.Options{
		Handlers: []observability.Handler{e.Recorder, otel},
		Sandbox: sandbox.Config{Mode: sandbox.Local, Workspace: e.Workspace, RuntimeDir: sandboxtest.TempDir(t),
			Local: sandbox.LocalConfig{FreshPerCommand: new(false)}},
		Model: llm.Config{Standard: llm.ModelConfig{BaseURL: e.Model.URL, Model: replay.Model}},
	}
	if mutate != nil {
		mutate(&o)
	}
	if e.Runtime, err = sage.New(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Runtime.Close(context.Background()) })
	return e
}

// Check fails t with every problem [Env.Problems] finds.
func (e *Env) Check(t testing.TB, agentName, answer string) {
	t.Helper()
	for _, p := range e.Problems(agentName, answer) {
		t.Error(p)
	}
}

// Problems lists what differs from a run of the replay's plan by an agent
// named agentName that answered answer: the workspace, the answer, the
// observability events and the spans. None means the run was right.
func (e *Env) Problems(agentName, answer string) []string {
	var p problems
	e.checkWorkspace(&p)
	if !strings.HasPrefix(answer, replay.Label+" Done.") || !strings.Contains(answer, fibOutput) {
		p.add("the answer is not the plan's last reply quoting fib.py's output: %q", answer)
	}
	e.checkEvents(&p, agentName)
	e.checkSpans(&p, agentName)
	return p
}

type problems []string

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

func (e *Env) checkWorkspace(p *problems) {
	if b, err := os.ReadFile(filepath.Join(e.Workspace, "fib.py")); err != nil || string(b) != replay.Script {
		p.add("fib.py was not written as the plan says (%v): %q", err, b)
	}
	b, err := os.ReadFile(filepath.Join(e.Workspace, "fib_output.txt"))
	if err != nil || !strings.Contains(string(b), fibOutput) || !strings.Contains(string(b), "sum: 986") {
		p.add("fib.py did not run in the sandbox (fib_output.txt: %v): %q", err, b)
	}
}

// The plan's tool calls, sorted, and a sandbox operation each one makes.
var (
	planTools   = []string{"execute_shell_command", "file_read", "file_write", "list_dir"}
	toolSandbox = map[string]string{"file_write": "write_file", "execute_shell_command": "start_background", "file_read": "read_file"}
)

// planModelCalls is how many model calls the plan takes.
const planModelCalls = 4

func (e *Env) checkEvents(p *problems, agentName string) {
	runs := map[uint64]observability.Run{}
	var agent *observability.Run
	var llmRuns, toolRuns, sandboxRuns []observability.Run
	for _, ev := range e.Recorder.Events() {
		switch ev.Op {
		case "LLMError", "ToolError", "AgentError", "ChainError":
			p.add("%s in run %s: %v", ev.Op, ev.Run.Name, ev.Err)
		}
		if !strings.HasSuffix(ev.Op, "Start") {
			continue
		}
		runs[ev.Run.ID] = ev.Run
		switch ev.Op {
		case "AgentStart":
			if ev.Run.Name == agentName && agent == nil {
				agent = &ev.Run
			}
		case "LLMStart":
			llmRuns = append(llmRuns, ev.Run)
		case "ToolStart":
			toolRuns = append(toolRuns, ev.Run)
		case "SandboxStart":
			sandboxRuns = append(sandboxRuns, ev.Run)
		}
	}
	if agent == nil {
		p.add("no agent run named %q was reported", agentName)
		return
	}
	under := func(r observability.Run, anc uint64) bool {
		for seen := 0; r.ParentID != 0 && seen < len(runs); seen++ {
			if r.ParentID == anc {
				return true
			}
			r = runs[r.ParentID]
		}
		return false
	}
	if len(llmRuns) != planModelCalls {
		p.add("%d model calls were reported, the plan makes %d", len(llmRuns), planModelCalls)
	}
	for _, r := range llmRuns {
		if !under(r, agent.ID) {
			p.add("model call %d is not inside the agent run %q (parent %d)", r.ID, agentName, r.ParentID)
		}
	}
	var names []string
	for _, r := range toolRuns {
		names = append(names, r.Name)
		if !under(r, agent.ID) {
			p.add("tool call %s is not inside the agent run %q", r.Name, agentName)
		}
		if op, ok := toolSandbox[r.Name]; ok && !slices.ContainsFunc(sandboxRuns, func(s observability.Run) bool {
			return s.Name == op && under(s, r.ID)
		}) {
			p.add("tool call %s has no sandbox %s inside it", r.Name, op)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, planTools) {
		p.add("the tool calls were %v, the plan makes %v", names, planTools)
	}
}

func (e *Env) checkSpans(p *problems, agentName string) {
	spans := e.Spans.Ended()
	var agent sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "invoke_agent "+agentName {
			agent = s
			break
		}
	}
	if agent == nil {
		p.add("no span %q", "invoke_agent "+agentName)
		return
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var inTrace []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() == agent.SpanContext().TraceID() {
			byID[s.SpanContext().SpanID()] = s
			inTrace = append(inTrace, s)
		}
	}
	under := func(s sdktrace.ReadOnlySpan, anc trace.SpanID) bool {
		for seen := 0; s != nil && s.Parent().IsValid() && seen < len(byID); seen++ {
			if s.Parent().SpanID() == anc {
				return true
			}
			s = byID[s.Parent().SpanID()]
		}
		return false
	}
	count := map[string]int{}
	roots := 0
	for _, s := range inTrace {
		count[s.Name()]++
		if !s.Parent().IsValid() || byID[s.Parent().SpanID()] == nil {
			roots++
		}
		if strings.HasPrefix(s.Name(), "chat ") || strings.HasPrefix(s.Name(), "execute_tool ") {
			if !under(s, agent.SpanContext().SpanID()) {
				p.add("span %q is not under %q", s.Name(), agent.Name())
			}
		}
	}
	if roots != 1 {
		p.add("the trace of %q has %d roots among its spans, want one tree", agent.Name(), roots)
	}
	if n := count["chat "+replay.Model]; n != planModelCalls {
		p.add("the trace has %d %q spans, want %d", n, "chat "+replay.Model, planModelCalls)
	}
	for _, tool := range planTools {
		if count["execute_tool "+tool] != 1 {
			p.add("the trace has %d %q spans, want 1", count["execute_tool "+tool], "execute_tool "+tool)
		}
	}
	for tool, op := range toolSandbox {
		if !slices.ContainsFunc(inTrace, func(s sdktrace.ReadOnlySpan) bool {
			parent := byID[s.Parent().SpanID()]
			return s.Name() == "sandbox."+op && parent != nil && parent.Name() == "execute_tool "+tool
		}) {
			p.add("no span %q under %q in the trace", "sandbox."+op, "execute_tool "+tool)
		}
	}
}

// Passthrough returns a Runtime over a passthrough sandbox in a temporary
// workspace, with the model named model at baseURL (an llmtest.Server's,
// say): for the tests of an adapter's conversions, which need no
// isolation. It is closed when t ends.
func Passthrough(t testing.TB, baseURL, model string) *sage.Runtime {
	t.Helper()
	rt, err := sage.New(context.Background(), sage.Options{
		Sandbox: sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir()},
		Model:   llm.Config{Standard: llm.ModelConfig{BaseURL: baseURL, Model: model}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}
