package observability_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/observability"
)

func TestConsoleHandlerPrintsTree(t *testing.T) {
	var buf bytes.Buffer
	m, _ := quietManager(t, observability.NewConsoleHandler(&buf, observability.ConsoleOptions{}))
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "sess-1", Name: "research"})
	actx := m.AgentStart(ctx, observability.AgentInfo{Name: "planner", Step: "plan"})
	lctx := m.LLMStart(actx, observability.LLMRequest{Model: "gpt-4o", ModelType: observability.ModelStandard})
	m.LLMEnd(lctx, observability.LLMResponse{
		Usage:            observability.Usage{InputTokens: 120, OutputTokens: 45, CacheReadInputTokens: 100},
		TimeToFirstChunk: 80 * time.Millisecond, FinishReasons: []string{"tool_calls"},
	})
	t1 := m.ToolStart(actx, observability.ToolCall{Name: "shell", CallID: "c1"})
	m.ToolEnd(t1, observability.ToolResult{Result: "ok"})
	t2 := m.ToolStart(actx, observability.ToolCall{Name: "shell", CallID: "c2"})
	m.ToolError(t2, errors.New("exit status 1"))
	mctx := m.MessageStart(actx, observability.Message{Role: "assistant"})
	m.MessageEnd(mctx, observability.Message{Role: "assistant"})
	assert.Zero(t, buf.Len(), "nothing printed before the chain ends")
	m.AgentEnd(actx, observability.AgentResult{})
	m.ChainEnd(ctx, observability.ChainResult{})

	out := buf.String()
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if assert.Len(t, lines, 5) {
		assert.True(t, strings.HasPrefix(lines[0], "invoke_workflow research  session=sess-1  "))
		assert.True(t, strings.HasPrefix(lines[1], "└─ invoke_agent planner (plan)  "))
		assert.True(t, strings.HasPrefix(lines[2], "   ├─ chat gpt-4o [standard]  "))
		assert.Contains(t, lines[2], "tokens in=120 out=45 cached=100 ttfc=80ms finish=tool_calls")
		assert.True(t, strings.HasPrefix(lines[3], "   ├─ execute_tool shell  "))
		assert.NotContains(t, lines[3], "ERROR")
		assert.True(t, strings.HasPrefix(lines[4], "   └─ execute_tool shell  "))
		assert.Contains(t, lines[4], "ERROR[_OTHER]: exit status 1")
	}

	// A second chain prints its own tree only.
	buf.Reset()
	ctx = m.ChainStart(context.Background(), observability.ChainInfo{Name: "second"})
	m.ChainError(ctx, context.DeadlineExceeded)
	assert.Regexp(t, `^invoke_workflow second  \S+  ERROR\[timeout\]: context deadline exceeded\n$`, buf.String())
}

// An error that ends a chat, its agent and the chain is printed once, on
// the chat: the agent and the chain say only that they failed.
func TestConsoleHandlerPrintsAnErrorOnce(t *testing.T) {
	var buf bytes.Buffer
	m, _ := quietManager(t, observability.NewConsoleHandler(&buf, observability.ConsoleOptions{}))
	err := errors.New("connection refused")
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{Name: "run"})
	actx := m.AgentStart(ctx, observability.AgentInfo{Name: "sage"})
	lctx := m.LLMStart(actx, observability.LLMRequest{Model: "m", ModelType: observability.ModelStandard})
	m.LLMError(lctx, err)
	m.AgentError(actx, err)
	m.ChainError(ctx, err)
	out := buf.String()
	t.Logf("\n%s", out)
	assert.Equal(t, 1, strings.Count(out, "connection refused"), out)
	assert.Equal(t, 3, strings.Count(out, "ERROR["), out)
}

// Message runs are left out of the tree unless Messages asks for them.
func TestConsoleHandlerMessages(t *testing.T) {
	for _, on := range []bool{false, true} {
		var buf bytes.Buffer
		m, _ := quietManager(t, observability.NewConsoleHandler(&buf, observability.ConsoleOptions{Messages: on}))
		ctx := m.ChainStart(context.Background(), observability.ChainInfo{Name: "run"})
		mctx := m.MessageStart(ctx, observability.Message{Role: "user-turn"})
		m.MessageEnd(mctx, observability.Message{Role: "user-turn"})
		m.ChainEnd(ctx, observability.ChainResult{})
		assert.Equal(t, on, strings.Contains(buf.String(), "user-turn"), "Messages=%v:\n%s", on, buf.String())
		assert.Contains(t, buf.String(), "run")
	}
}
