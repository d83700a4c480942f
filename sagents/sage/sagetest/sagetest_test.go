package sagetest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/sage/sagetest"
)

// TestSageAgentPassesTheKit: sage's own agent loop is what the kit was
// written from; it passes, in the runtime sage.New wires.
func TestSageAgentPassesTheKit(t *testing.T) {
	e := sagetest.New(t, nil)
	res, err := e.Runtime.Run(context.Background(), sagetest.Task)
	require.NoError(t, err)
	e.Check(t, "sage", res.Answer)
}

// TestKitFindsAWrongRun is the control: tool calls made outside any agent
// run, one step of the plan only, and a wrong answer are each reported.
func TestKitFindsAWrongRun(t *testing.T) {
	e := sagetest.New(t, nil)
	args, _ := json.Marshal(map[string]string{"path": "fib.py", "content": replay.Script})
	_, err := e.Runtime.Tools.Run(context.Background(), "file_write", args)
	require.NoError(t, err)
	probs := strings.Join(e.Problems("sage", "an answer"), "\n")
	for _, want := range []string{"did not run in the sandbox", "the answer is not", `no agent run named "sage"`, `no span "invoke_agent sage"`} {
		assert.Contains(t, probs, want)
	}
	assert.NotContains(t, probs, "fib.py was not written", "the step that ran is not reported")
}

// TestKitFindsToolsOutsideTheAgent is the control of the nesting checks:
// after a right run, one more tool call outside the agent is found.
func TestKitFindsToolsOutsideTheAgent(t *testing.T) {
	e := sagetest.New(t, nil)
	res, err := e.Runtime.Run(context.Background(), sagetest.Task)
	require.NoError(t, err)
	require.Empty(t, e.Problems("sage", res.Answer))
	_, err = e.Runtime.Tools.Run(context.Background(), "list_dir", json.RawMessage(`{"path":"."}`))
	require.NoError(t, err)
	probs := strings.Join(e.Problems("sage", res.Answer), "\n")
	assert.Contains(t, probs, "tool call list_dir is not inside the agent run")
	assert.Contains(t, probs, "the tool calls were [execute_shell_command file_read file_write list_dir list_dir]")
	assert.Contains(t, strings.Join(e.Problems("other", res.Answer), "\n"), `no agent run named "other"`)
}
