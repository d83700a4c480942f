package observability_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
)

func ops(r *observabilitytest.Recorder) []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Op)
	}
	return out
}

// TestStartAgentOwnsTheTurn: with no run in the context, the agent run gets
// a chain of its own, and the end ends both (the model call under it
// nests in one tree).
func TestStartAgentOwnsTheTurn(t *testing.T) {
	rec := &observabilitytest.Recorder{}
	m := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	ctx, end := m.StartAgent(context.Background(), observability.AgentInfo{Name: "coder", SessionID: "s1"})
	lctx := m.LLMStart(ctx, observability.LLMRequest{Model: "m"})
	m.LLMEnd(lctx, observability.LLMResponse{})
	end([]observability.Message{{Role: "assistant", Content: "done"}}, nil)
	end(nil, errors.New("again")) // harmless

	assert.Equal(t, []string{"ChainStart", "AgentStart", "LLMStart", "LLMEnd", "AgentEnd", "ChainEnd"}, ops(rec))
	ev := rec.Events()
	chain, agent, llm := ev[0].Run, ev[1].Run, ev[2].Run
	assert.Equal(t, "coder", chain.Name)
	assert.Equal(t, chain.ID, agent.ParentID)
	assert.Equal(t, agent.ID, llm.ParentID)
	assert.Equal(t, chain.ID, llm.RootID)
	assert.Equal(t, "s1", llm.SessionID, "the session is inherited")
	res := observabilitytest.Data[observability.ChainResult](rec, "ChainEnd")
	require.Len(t, res, 1)
	assert.Equal(t, "done", res[0].Outputs[0].Content)
}

// TestStartAgentInsideARun: inside a run (a workflow's chain, a parent
// agent), no chain is added, and an error ends only the agent.
func TestStartAgentInsideARun(t *testing.T) {
	rec := &observabilitytest.Recorder{}
	m := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	cctx := m.ChainStart(context.Background(), observability.ChainInfo{Name: "workflow"})
	_, end := m.StartAgent(cctx, observability.AgentInfo{Name: "step"})
	boom := errors.New("boom")
	end(nil, boom)
	assert.Equal(t, []string{"ChainStart", "AgentStart", "AgentError"}, ops(rec))
	assert.Equal(t, []error{boom}, rec.Errs("AgentError"))
	m.ChainEnd(cctx, observability.ChainResult{})
	assert.Equal(t, "ChainEnd", ops(rec)[3], "the caller's chain is still open until the caller ends it")
}

// TestStartAgentWithoutHandlers: a Manager with no handlers (and a nil
// one) starts nothing and end is still safe to call.
func TestStartAgentWithoutHandlers(t *testing.T) {
	for _, m := range []*observability.Manager{nil, observability.New(observability.Options{})} {
		ctx, end := m.StartAgent(context.Background(), observability.AgentInfo{Name: "a"})
		_, ok := observability.RunFromContext(ctx)
		assert.False(t, ok)
		end(nil, nil)
	}
}
