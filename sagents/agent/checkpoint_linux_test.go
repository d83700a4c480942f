//go:build linux

package agent_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// TestAgentCheckpointsAndUndo: with Config.Checkpoints the agent saves
// the workspace before the first turn and after each turn (a turn that
// changed nothing reuses the last checkpoint), each checkpoint's event
// carries its id and turn, and the undo tool, driven by the fake model,
// rolls the files back to before the last turn that changed them, then
// to a given turn.
func TestAgentCheckpointsAndUndo(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	srv := llmtest.New(t,
		toolReply([3]string{"c1", "file_write", `{"path":"a.txt","content":"one\n"}`}),
		toolReply([3]string{"c2", "file_read", `{"path":"a.txt"}`}),
		toolReply([3]string{"c3", "execute_shell_command", `{"command":"rm a.txt && echo two > b.txt"}`}),
		toolReply([3]string{"c4", "undo", `{}`}),
		toolReply([3]string{"c5", "file_read", `{"path":"a.txt"}`}),
		toolReply([3]string{"c6", "undo", `{"turn":0}`}),
		llmtest.Text("Undone."),
	)
	rec := &observabilitytest.Recorder{}
	obs := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	fresh := false
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t),
		SandboxID: "agent-ckpt", Observer: obs,
		Local: sandbox.LocalConfig{Checkpoints: true, FreshPerCommand: &fresh, Isolation: sandbox.Isolation{Linux: sandbox.IsolationBwrap}}})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	client, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"}, Observer: obs,
		Retry: llm.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	tm := tools.NewManager(h, tools.Options{Observer: obs})
	require.NoError(t, tm.Register(append(tools.Builtins(tools.BuiltinOptions{}), tools.UndoTool())...))
	var log bytes.Buffer
	a, err := agent.New(agent.Config{Client: client, Tools: tm, Observer: obs, SessionID: "s1", MaxSteps: 10, Log: &log, Checkpoints: true})
	require.NoError(t, err)

	res, err := a.Run(ctx, "write, break, undo")
	require.NoError(t, err, log.String())
	require.Equal(t, "Undone.", res.Answer)
	require.Len(t, res.ToolCalls, 6)
	for _, tc := range res.ToolCalls {
		require.NoError(t, tc.Err, "%s: %s", tc.Name, tc.Result)
	}
	assert.Contains(t, res.ToolCalls[3].Result, "state after turn 2; undone: the changes of turn 3")
	assert.Equal(t, "one\n", res.ToolCalls[4].Result[len(res.ToolCalls[4].Result)-4:], "a.txt is back: %s", res.ToolCalls[4].Result)
	assert.Contains(t, res.ToolCalls[5].Result, "state before the first turn; undone: the changes of turn 1 2 4 5")
	ents, err := h.ListDirectory(ctx, ".")
	require.NoError(t, err)
	assert.Empty(t, ents, "turn 0's state: nothing")

	// Turns 0 to 6: 0, 1 (a.txt), 2 (read: reuses 1), 3, 4 (the undo: 1's
	// again), 5 (read), 6 (the undo: 0's again).
	require.Len(t, res.Checkpoints, 7, log.String())
	ids := make([]sandbox.CheckpointID, len(res.Checkpoints))
	for i, c := range res.Checkpoints {
		ids[i] = c.ID
	}
	assert.Equal(t, ids[1], ids[2], "turn 2 changed nothing")
	assert.NotEqual(t, ids[1], ids[3])
	assert.Equal(t, ids[1], ids[4], "after the undo the state is turn 1's")
	assert.Equal(t, ids[0], ids[6])
	var seen []observability.CheckpointInfo
	for _, r := range observabilitytest.Data[observability.SandboxResult](rec, "SandboxEnd") {
		if r.Checkpoint != nil {
			seen = append(seen, *r.Checkpoint)
		}
	}
	require.Len(t, seen, 7)
	for i, c := range seen {
		assert.Equal(t, i, c.Turn)
		assert.Equal(t, string(ids[i]), c.ID)
	}
	assert.Positive(t, seen[1].Size)
	assert.Zero(t, seen[2].Size, "an unchanged turn adds nothing")
	list, err := h.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "the undo to turn 0 dropped the later checkpoints")
	assert.Equal(t, []int{0, 6}, list[0].Turns)
}

// TestAgentCheckpointsUnprivileged re-runs TestAgentCheckpointsAndUndo as
// an ordinary user.
func TestAgentCheckpointsUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged")
	}
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	_, err := testenv.RunUnprivileged(t, []string{"-test.run", "^TestAgentCheckpointsAndUndo$", "-test.count=1"})
	require.NoError(t, err)
}
