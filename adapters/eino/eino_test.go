package einosage_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	einosage "github.com/sage-go/sage/adapters/eino"
	"github.com/sage-go/sage/sagents/sage/sagetest"
)

// newAgent is what an Eino user writes: the sage tools and the sage
// model in Eino's own ReAct agent.
func newAgent(t *testing.T, e *sagetest.Env, stream bool) *react.Agent {
	t.Helper()
	tools, err := einosage.Tools(e.Runtime.Tools)
	require.NoError(t, err)
	cfg := &react.AgentConfig{
		ToolCallingModel: einosage.NewChatModel(e.Runtime.Client, einosage.ModelOptions{CacheKey: "s1"}),
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
	}
	if stream {
		cfg.StreamToolCallChecker = einosage.StreamToolCallChecker
	}
	ag, err := react.NewAgent(context.Background(), cfg)
	require.NoError(t, err)
	return ag
}

func traced(e *sagetest.Env) agent.AgentOption {
	return agent.WithComposeOptions(compose.WithCallbacks(einosage.Callbacks(e.Runtime.Observer, einosage.CallbackOptions{Name: "coder"})))
}

// TestReActAgentDrivesSageTools: Eino's ReAct agent, on sage's model
// client and tools in a local session sandbox, plays the replay's plan:
// the file is written, the command runs, the answer comes back, and the
// trace is one tree under the Eino agent's run.
func TestReActAgentDrivesSageTools(t *testing.T) {
	e := sagetest.New(t, nil)
	msg, err := newAgent(t, e, false).Generate(context.Background(), []*schema.Message{schema.UserMessage(sagetest.Task)}, traced(e))
	require.NoError(t, err)
	e.Check(t, "coder", msg.Content)
}

// TestReActAgentStreams: the same through Stream, with the checker that
// finds tool calls after text.
func TestReActAgentStreams(t *testing.T) {
	e := sagetest.New(t, nil)
	sr, err := newAgent(t, e, true).Stream(context.Background(), []*schema.Message{schema.UserMessage(sagetest.Task)}, traced(e))
	require.NoError(t, err)
	var answer strings.Builder
	for {
		m, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		answer.WriteString(m.Content)
	}
	sr.Close()
	require.Eventually(t, func() bool { return len(e.Problems("coder", answer.String())) == 0 }, sagetestWait, sagetestTick,
		"the streamed run ends when its output is read: %v", e.Problems("coder", answer.String()))
}

// TestWithoutCallbacksNoAgentRun is the control of the trace check: the
// same run without einosage.Callbacks has model and tool calls but no
// agent run around them.
func TestWithoutCallbacksNoAgentRun(t *testing.T) {
	e := sagetest.New(t, nil)
	msg, err := newAgent(t, e, false).Generate(context.Background(), []*schema.Message{schema.UserMessage(sagetest.Task)})
	require.NoError(t, err)
	probs := strings.Join(e.Problems("coder", msg.Content), "\n")
	assert.Contains(t, probs, `no agent run named "coder"`)
	assert.NotContains(t, probs, "fib.py", "the tools still did the work")
}
