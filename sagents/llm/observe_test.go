package llm_test

import (
	"context"
	"errors"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
)

// starts and ends are the LLMStart and LLMEnd events rec got.
func starts(rec *observabilitytest.Recorder) []observability.LLMRequest {
	return observabilitytest.Data[observability.LLMRequest](rec, "LLMStart")
}

func ends(rec *observabilitytest.Recorder) []observability.LLMResponse {
	return observabilitytest.Data[observability.LLMResponse](rec, "LLMEnd")
}

func TestObserverEvents(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Chat("hi"),
		llmtest.Reply{Events: append(llmtest.TextEvents("a", "b"), llmtest.UsageChunk(7, 3, 2, 1))},
		llmtest.Error(400, "invalid_request_error", "", "", "bad"),
		llmtest.Text("abandoned"),
	)
	rec := &observabilitytest.Recorder{}
	c, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"},
		Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}}), Retry: llm.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	ctx := context.Background()
	req := llm.Request{}
	req.Messages = []openai.ChatCompletionMessage{{Role: "user", Content: "hello"}}

	_, err = c.Chat(ctx, req)
	require.NoError(t, err)
	s, err := c.ChatStream(ctx, req)
	require.NoError(t, err)
	_, err = s.Collect()
	require.NoError(t, err)
	_, err = c.Chat(ctx, req)
	require.Error(t, err)
	s, err = c.ChatStream(ctx, req)
	require.NoError(t, err)
	s.Close() // before the end

	require.Len(t, starts(rec), 4)
	require.Equal(t, "m", starts(rec)[0].Model)
	require.Equal(t, "127.0.0.1", starts(rec)[0].ServerAddress)
	require.NotZero(t, starts(rec)[0].ServerPort)
	require.Equal(t, observability.ModelStandard, starts(rec)[0].ModelType)
	require.False(t, starts(rec)[0].Stream)
	require.True(t, starts(rec)[1].Stream)
	require.Equal(t, "hello", starts(rec)[0].Messages[0].Content)

	require.Len(t, ends(rec), 2)
	require.Equal(t, int64(5), ends(rec)[0].Usage.InputTokens)
	require.Equal(t, []string{"stop"}, ends(rec)[0].FinishReasons)
	require.Equal(t, "hi", ends(rec)[0].Messages[0].Content)
	require.Equal(t, int64(7), ends(rec)[1].Usage.InputTokens)
	require.Equal(t, int64(2), ends(rec)[1].Usage.CacheReadInputTokens)
	require.Equal(t, int64(1), ends(rec)[1].Usage.ReasoningTokens)
	require.NotZero(t, ends(rec)[1].TimeToFirstChunk)
	require.Equal(t, "ab", ends(rec)[1].Messages[0].Content)

	require.Len(t, rec.Errs("LLMError"), 2)
	require.ErrorIs(t, rec.Errs("LLMError")[0], llm.ErrBadRequest)
	require.True(t, errors.Is(rec.Errs("LLMError")[1], llm.ErrStreamClosed))
}
