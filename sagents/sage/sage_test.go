package sage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/agent/replay"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sage"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/tools"
)

var passthrough = sandbox.Config{Mode: sandbox.Passthrough}

// workspaces lists the temporary workspaces New made under TMPDIR, which
// the test points at a directory of its own.
func workspaces(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(os.TempDir(), "sage-workspace-*"))
	require.NoError(t, err)
	return m
}

func ownTmp(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
}

// TestOneObserverReachesEveryPart: the Handlers given once get the
// sandbox's, the model client's, the tools' and the agent's events.
func TestOneObserverReachesEveryPart(t *testing.T) {
	model, err := replay.Start()
	require.NoError(t, err)
	model.ChunkDelay = 0
	defer model.Close()
	rec := &observabilitytest.Recorder{}
	rt, err := sage.New(context.Background(), sage.Options{Handlers: []observability.Handler{rec}, Sandbox: passthrough,
		Model: llm.Config{Standard: llm.ModelConfig{BaseURL: model.URL, Model: replay.Model}}})
	require.NoError(t, err)
	defer rt.Close(context.Background())
	_, err = rt.Run(context.Background(), "go")
	require.NoError(t, err)
	for _, op := range []string{"ChainStart", "AgentStart", "LLMStart", "ToolStart", "SandboxStart"} {
		assert.NotEmpty(t, observabilitytest.Data[any](rec, op), "no %s event", op)
	}
	assert.Len(t, observabilitytest.Data[observability.ToolCall](rec, "ToolStart"), 4)
}

// TestNewRefusesASecondObserver: a Manager given in a part's own config as
// well as (or instead of) Options.Observer is a config error, as are the
// fields New sets itself; nothing is built.
func TestNewRefusesASecondObserver(t *testing.T) {
	ownTmp(t)
	mine, other := observability.New(observability.Options{}), observability.New(observability.Options{})
	model := llm.Config{Standard: llm.ModelConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}}
	for name, c := range map[string]struct {
		o    sage.Options
		want string
	}{
		"sandbox":  {sage.Options{Observer: mine, Sandbox: sandbox.Config{Mode: sandbox.Passthrough, Observer: other}}, "Options.Sandbox.Observer"},
		"model":    {sage.Options{Sandbox: passthrough, Model: llm.Config{Standard: model.Standard, Observer: other}}, "Options.Model.Observer"},
		"tools":    {sage.Options{Sandbox: passthrough, Tools: tools.Options{Observer: other}}, "Options.Tools.Observer"},
		"agent":    {sage.Options{Sandbox: passthrough, Model: model, Agent: agent.Config{Observer: other}}, "Options.Agent.Observer"},
		"handlers": {sage.Options{Observer: mine, Handlers: []observability.Handler{&observabilitytest.Recorder{}}}, "Options.Handlers"},
		"client":   {sage.Options{Sandbox: passthrough, Model: model, Agent: agent.Config{Tools: &tools.Manager{}}}, "Options.Agent.Client and Options.Agent.Tools"},
		"no model": {sage.Options{Sandbox: passthrough, Agent: agent.Config{MaxSteps: 3}}, "Options.Model names no model"},
	} {
		rt, err := sage.New(context.Background(), c.o)
		assert.Nil(t, rt, name)
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), c.want, name)
		}
	}
	same := sage.Options{Observer: mine, Sandbox: sandbox.Config{Mode: sandbox.Passthrough, Observer: mine}}
	rt, err := sage.New(context.Background(), same)
	require.NoError(t, err, "the same Manager twice is not a second one")
	require.NoError(t, rt.Close(context.Background()))
	assert.Empty(t, workspaces(t))
}

// TestNewLeavesNothingBehind: when a part fails to build, the parts built
// before it are closed and the temporary workspace is removed.
func TestNewLeavesNothingBehind(t *testing.T) {
	ownTmp(t)
	rec := &observabilitytest.Recorder{}
	rt, err := sage.New(context.Background(), sage.Options{Handlers: []observability.Handler{rec}, Sandbox: passthrough,
		Model: llm.Config{Standard: llm.ModelConfig{BaseURL: "http://127.0.0.1:1/v1"}}})
	assert.Nil(t, rt)
	var ce *llm.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "sage: model:")
	assert.Empty(t, workspaces(t), "the temporary workspace is removed")
	var ops []string
	for _, op := range observabilitytest.Data[observability.SandboxOp](rec, "SandboxStart") {
		ops = append(ops, op.Op)
	}
	assert.Equal(t, []string{"acquire", "release"}, ops, "the sandbox was opened and closed again")

	dup := tools.NewFunc("file_read", "a second file_read", func(context.Context, tools.Sandbox, struct{}) (tools.Result, error) {
		return tools.Result{}, nil
	})
	_, err = sage.New(context.Background(), sage.Options{Sandbox: passthrough, ExtraTools: []tools.Tool{dup}})
	require.ErrorContains(t, err, `sage: tools: tools: "file_read" is already registered`)
	assert.Empty(t, workspaces(t))
}

// TestCloseRemovesOnlyWhatNewMade: the temporary workspace goes, a
// workspace the caller named stays; Close is idempotent.
func TestCloseRemovesOnlyWhatNewMade(t *testing.T) {
	ownTmp(t)
	rt, err := sage.New(context.Background(), sage.Options{Sandbox: passthrough})
	require.NoError(t, err)
	require.Len(t, workspaces(t), 1)
	assert.Equal(t, workspaces(t)[0], rt.Sandbox.HostWorkspacePath())
	require.NoError(t, rt.Close(context.Background()))
	require.NoError(t, rt.Close(context.Background()))
	assert.Empty(t, workspaces(t))
	_, err = rt.Sandbox.ReadFile(context.Background(), "x")
	assert.ErrorIs(t, err, sandbox.ErrClosed)

	dir := t.TempDir()
	rt, err = sage.New(context.Background(), sage.Options{Sandbox: sandbox.Config{Mode: sandbox.Passthrough, Workspace: dir}})
	require.NoError(t, err)
	require.NoError(t, rt.Close(context.Background()))
	assert.DirExists(t, dir)
}

// TestWithoutAModel: no model, no agent: the tools still run (for a
// framework's own model), and Run says what is missing.
func TestWithoutAModel(t *testing.T) {
	ownTmp(t)
	rt, err := sage.New(context.Background(), sage.Options{Sandbox: passthrough})
	require.NoError(t, err)
	defer rt.Close(context.Background())
	assert.Nil(t, rt.Client)
	assert.Nil(t, rt.Agent)
	_, err = rt.Run(context.Background(), "go")
	assert.True(t, errors.Is(err, sage.ErrNoAgent))
	assert.Contains(t, rt.Tools.Names(), "execute_shell_command", "the built-ins are registered")
	out, err := rt.Tools.Run(context.Background(), "execute_shell_command", []byte(`{"command":"echo hi"}`))
	require.NoError(t, err)
	assert.Contains(t, out, "hi")

	rt2, err := sage.New(context.Background(), sage.Options{Sandbox: passthrough, NoBuiltins: true})
	require.NoError(t, err)
	defer rt2.Close(context.Background())
	assert.Empty(t, rt2.Tools.Names())
}
