package llm_test

import (
	"context"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
)

// TestObserverSeesToolCallsAndParams: the observer receives the model's
// tool calls as structured calls (not flattened into the content), the
// finish reason of each output message, the request parameters that were
// set, and a low-cardinality error type.
func TestObserverSeesToolCallsAndParams(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Reply{Events: []string{
			llmtest.Chunk(0, `{"role":"assistant","content":"Let me look."}`, ""),
			llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "call_1", "shell", `{"cmd":"ls"}`)), ""),
			llmtest.Chunk(0, `{}`, "tool_calls"),
		}},
		llmtest.Error(429, "rate_limit_error", "", "", "slow down"),
	)
	rec := &observabilitytest.Recorder{}
	c, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"},
		Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}}), Retry: llm.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	temp, seed := float32(0.7), 7
	req := llm.Request{Temperature: &temp}
	req.MaxCompletionTokens = 256
	req.Stop = []string{"END"}
	req.Seed = &seed
	req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	req.Messages = []openai.ChatCompletionMessage{
		{Role: "user", Content: "list"},
		{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "call_0", Type: "function",
			Function: openai.FunctionCall{Name: "shell", Arguments: `{"cmd":"pwd"}`}}}},
		{Role: "tool", ToolCallID: "call_0", Content: "/work"},
	}
	s, err := c.ChatStream(context.Background(), req)
	require.NoError(t, err)
	_, err = s.Collect()
	require.NoError(t, err)
	_, err = c.Chat(context.Background(), req)
	require.Error(t, err)

	require.Len(t, starts(rec), 2)
	in := starts(rec)[0].Messages
	require.Len(t, in, 3)
	require.Empty(t, in[1].Content, "tool calls are not flattened into the content")
	require.Equal(t, []observability.ToolCallRef{{ID: "call_0", Name: "shell", Arguments: `{"cmd":"pwd"}`}}, in[1].ToolCalls)
	require.Equal(t, "call_0", in[2].ToolCallID)
	p := starts(rec)[0].Params
	require.NotNil(t, p.Temperature)
	require.Equal(t, 0.7, *p.Temperature)
	require.Nil(t, p.TopP)
	require.Equal(t, 256, p.MaxTokens)
	require.Equal(t, []string{"END"}, p.Stop)
	require.Equal(t, int64(7), *p.Seed)
	require.Equal(t, "json", p.OutputType)

	require.Len(t, ends(rec), 1)
	out := ends(rec)[0].Messages
	require.Len(t, out, 1)
	require.Equal(t, "Let me look.", out[0].Content)
	require.Equal(t, "tool_calls", out[0].FinishReason)
	require.Equal(t, []observability.ToolCallRef{{ID: "call_1", Name: "shell", Arguments: `{"cmd":"ls"}`}}, out[0].ToolCalls)

	require.Len(t, rec.Errs("LLMError"), 1)
	require.Equal(t, "rate_limited", observability.ErrorType(rec.Errs("LLMError")[0]))
}

// TestObserverSeesEmbeddings: each embeddings request is an llm run with
// the embeddings operation, its model, dimensions and input tokens.
func TestObserverSeesEmbeddings(t *testing.T) {
	srv := llmtest.New(t)
	n := 0
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply {
		if n++; n == 2 {
			return llmtest.Error(429, "rate_limit_error", "", "", "slow down")
		}
		return llmtest.EchoEmbeddings(r)
	})
	rec := &observabilitytest.Recorder{}
	c, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"},
		Embedding:          llm.ModelConfig{BaseURL: srv.URL, Model: "embed-model"},
		EmbeddingBatchSize: 2, EmbeddingDimensions: 2,
		Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}}), Retry: llm.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	_, err = c.Embed(context.Background(), []string{"a", "b", "c"})
	require.Error(t, err)

	require.Len(t, starts(rec), 2)
	for _, r := range starts(rec) {
		require.Equal(t, observability.OpEmbeddings, r.Operation)
		require.Equal(t, "embed-model", r.Model)
		require.Equal(t, 2, r.Params.Dimensions)
	}
	require.Len(t, ends(rec), 1)
	require.Equal(t, int64(1), ends(rec)[0].Usage.InputTokens)
	require.Len(t, rec.Errs("LLMError"), 1)
	require.Equal(t, "rate_limited", observability.ErrorType(rec.Errs("LLMError")[0]))
}
