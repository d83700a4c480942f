package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// count counts the events that, written "kind.op name" (op: start, end
// or error), begin with prefix.
func count(rec *observabilitytest.Recorder, prefix string) int {
	n := 0
	for _, e := range rec.Events() {
		op := "start"
		switch {
		case strings.HasSuffix(e.Op, "End"):
			op = "end"
		case strings.HasSuffix(e.Op, "Error"):
			op = "error"
		}
		if strings.HasPrefix(fmt.Sprintf("%s.%s %s", e.Run.Kind, op, e.Run.Name), prefix) {
			n++
		}
	}
	return n
}

func toolReply(calls ...[3]string) llmtest.Reply {
	ev := []string{llmtest.Chunk(0, `{"role":"assistant","content":"Working."}`, "")}
	for i, c := range calls {
		args := c[2]
		ev = append(ev,
			llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(i, c[0], c[1], args[:len(args)/2])), ""),
			llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(i, "", "", args[len(args)/2:])), ""))
	}
	ev = append(ev, llmtest.Chunk(0, `{}`, "tool_calls"), llmtest.UsageChunk(100, 20, 0, 0))
	return llmtest.Reply{Events: ev}
}

func setup(t *testing.T, srvURL string) (*agent.Agent, *observabilitytest.Recorder, *sandbox.Sandbox, *bytes.Buffer) {
	t.Helper()
	rec := &observabilitytest.Recorder{}
	obs := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	client, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srvURL, Model: "m"}, Observer: obs,
		Retry: llm.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	tm := tools.NewManager(h, tools.Options{Observer: obs})
	require.NoError(t, tm.Register(tools.Builtins(tools.BuiltinOptions{})...))
	var out bytes.Buffer
	a, err := agent.New(agent.Config{Client: client, Tools: tm, Observer: obs, SessionID: "s1", Output: &out, MaxSteps: 5})
	require.NoError(t, err)
	return a, rec, h, &out
}

func TestAgentLoopEndToEnd(t *testing.T) {
	srv := llmtest.New(t,
		toolReply([3]string{"call_1", "file_write", `{"path":"hello.py","content":"print('hi from python')\n"}`}),
		toolReply(
			[3]string{"call_2", "execute_shell_command", `{"command":"sleep 0.5; python3 hello.py > out.txt; echo ok"}`},
			[3]string{"call_3", "execute_shell_command", `{"command":"sleep 0.5; echo parallel > par.txt"}`},
			[3]string{"call_4", "file_read", `{"path":"missing.txt"}`},
		),
		toolReply([3]string{"call_5", "file_read", `{"path":"out.txt"}`}),
		llmtest.Text("The script ", "printed: hi from python."),
	)
	a, rec, h, out := setup(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	res, err := a.Run(ctx, "write and run hello.py")
	require.NoError(t, err)
	require.Equal(t, "The script printed: hi from python.", res.Answer)
	require.Equal(t, 4, res.Steps)
	require.Less(t, time.Since(start), 5*time.Second)

	// The tool calls made, in order.
	var names []string
	for _, c := range res.ToolCalls {
		names = append(names, c.ID+":"+c.Name)
	}
	require.Equal(t, []string{"call_1:file_write", "call_2:execute_shell_command", "call_3:execute_shell_command",
		"call_4:file_read", "call_5:file_read"}, names)
	require.Error(t, res.ToolCalls[3].Err)
	require.Contains(t, res.ToolCalls[3].Result, `"error_code":"not_found"`)
	require.Contains(t, res.ToolCalls[4].Result, "hi from python")

	// Files left in the workspace.
	for p, want := range map[string]string{"hello.py": "print('hi from python')\n", "out.txt": "hi from python\n", "par.txt": "parallel\n"} {
		b, err := h.ReadFile(ctx, p)
		require.NoError(t, err, p)
		require.Equal(t, want, string(b))
	}
	// Streamed text.
	require.Contains(t, out.String(), "Working.")
	require.Contains(t, out.String(), "The script printed: hi from python.")

	// What the model was sent: tools, then the results in call order.
	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	body := reqs[0].JSON(t)
	require.Len(t, body["tools"], 10)
	require.Equal(t, true, body["stream"])
	var last struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(reqs[2].Body, &last))
	var ids []string
	for _, m := range last.Messages {
		if m.Role == "tool" {
			ids = append(ids, m.ToolCallID)
		}
	}
	require.Equal(t, []string{"call_1", "call_2", "call_3", "call_4"}, ids)

	// Events: one chain, one agent, four llm calls, five tool calls (one
	// failed), messages for the task and each reply.
	require.Equal(t, 1, count(rec, "chain.start"))
	require.Equal(t, 1, count(rec, "chain.end"))
	require.Equal(t, 1, count(rec, "agent.start"))
	require.Equal(t, 1, count(rec, "agent.end"))
	require.Equal(t, 4, count(rec, "llm.start"))
	require.Equal(t, 4, count(rec, "llm.end"))
	require.Equal(t, 5, count(rec, "tool.start"))
	require.Equal(t, 4, count(rec, "tool.end"))
	require.Equal(t, 1, count(rec, "tool.error file_read"))
	require.Equal(t, 5, count(rec, "message.start"))
	require.Equal(t, int64(100), observabilitytest.Data[observability.LLMResponse](rec, "LLMEnd")[0].Usage.InputTokens)
	require.Equal(t, int64(20), observabilitytest.Data[observability.LLMResponse](rec, "LLMEnd")[0].Usage.OutputTokens)
	require.Equal(t, "call_1", observabilitytest.Data[observability.ToolCall](rec, "ToolStart")[0].CallID)
	// The agent's model is known when it starts (for sampling), not only
	// once its first call answered.
	ai := observabilitytest.Data[observability.AgentInfo](rec, "AgentStart")
	require.Len(t, ai, 1)
	require.Equal(t, "openai", ai[0].Provider)
	require.NotEmpty(t, ai[0].Model)
	require.Equal(t, observabilitytest.Data[observability.LLMRequest](rec, "LLMStart")[0].Model, ai[0].Model)
}

func TestAgentStopsAtMaxSteps(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply {
		return toolReply([3]string{"c", "list_dir", `{}`})
	})
	a, rec, _, _ := setup(t, srv.URL)
	res, err := a.Run(context.Background(), "loop")
	require.ErrorIs(t, err, agent.ErrMaxSteps)
	assert.Equal(t, "max_steps", observability.ErrorType(err), "a low-cardinality error.type for traces")
	require.Equal(t, 5, res.Steps)
	require.Equal(t, 0, count(rec, "chain.end"))
	require.Equal(t, 0, count(rec, "agent.end"))
}

func TestAgentInvalidToolArguments(t *testing.T) {
	srv := llmtest.New(t,
		toolReply([3]string{"c1", "file_read", `{"path": "x"`}), // truncated JSON
		llmtest.Text("gave up"),
	)
	a, rec, _, _ := setup(t, srv.URL)
	res, err := a.Run(context.Background(), "read")
	require.NoError(t, err)
	require.Contains(t, res.ToolCalls[0].Result, `"error_code":"invalid_arguments"`)
	require.Equal(t, 1, count(rec, "tool.error"))
}

func TestReplayModel(t *testing.T) {
	srv, err := replay.Start()
	require.NoError(t, err)
	srv.ChunkDelay = 0
	defer srv.Close()
	a, rec, h, out := setup(t, srv.URL)
	res, err := a.Run(context.Background(), "anything")
	require.NoError(t, err)
	require.Equal(t, 4, res.Steps)
	require.True(t, strings.HasPrefix(res.Answer, replay.Label))
	require.Contains(t, res.Answer, "sum: 986")
	require.Contains(t, out.String(), "scripted replay")
	b, err := h.ReadFile(context.Background(), "fib.py")
	require.NoError(t, err)
	require.Equal(t, replay.Script, string(b))
	require.Equal(t, 4, count(rec, "tool.end"))
}
