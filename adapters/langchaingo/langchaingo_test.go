package langchaingosage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"

	langchaingosage "github.com/sage-go/sage/adapters/langchaingo"
	"github.com/sage-go/sage/sagents/sage/sagetest"
)

// newExecutor is what a LangChainGo user writes: the sage tools and the
// sage model in LangChainGo's OpenAI functions agent and executor.
func newExecutor(e *sagetest.Env) *agents.Executor {
	model := langchaingosage.NewModel(e.Runtime.Client, langchaingosage.ModelOptions{Tools: e.Runtime.Tools, CacheKey: "s1"})
	return agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, langchaingosage.Tools(e.Runtime.Tools)))
}

// TestExecutorDrivesSageTools: LangChainGo's agent executor, on sage's
// model client and tools in a local session sandbox, plays the replay's
// plan: the file is written, the command runs, the answer comes back, and
// the trace is one tree under the traced executor's run.
func TestExecutorDrivesSageTools(t *testing.T) {
	e := sagetest.New(t, nil)
	answer, err := chains.Run(context.Background(), langchaingosage.Traced(e.Runtime.Observer, "coder", newExecutor(e)), sagetest.Task)
	require.NoError(t, err)
	e.Check(t, "coder", answer)
}

// TestWithoutTracedNoAgentRun is the control of the trace check: the
// executor run bare has model and tool calls but no agent run around
// them (LangChainGo's callbacks have no context to nest in).
func TestWithoutTracedNoAgentRun(t *testing.T) {
	e := sagetest.New(t, nil)
	answer, err := chains.Run(context.Background(), newExecutor(e), sagetest.Task)
	require.NoError(t, err)
	probs := strings.Join(e.Problems("coder", answer), "\n")
	assert.Contains(t, probs, `no agent run named "coder"`)
	assert.NotContains(t, probs, "fib.py", "the tools still did the work")
}
