package llm_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/observability"
)

type llmRecorder struct {
	observability.Base
	mu   sync.Mutex
	reqs []observability.LLMRequest
	ends []observability.LLMResponse
	errs []error
}

func (r *llmRecorder) LLMStart(ctx context.Context, q observability.LLMRequest) (context.Context, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, q)
	return ctx, nil
}
func (r *llmRecorder) LLMEnd(_ context.Context, e observability.LLMResponse) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, e)
	return nil
}
func (r *llmRecorder) LLMError(_ context.Context, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	return nil
}

func TestObserverEvents(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Chat("hi"),
		llmtest.Reply{Events: append(llmtest.TextEvents("a", "b"), llmtest.UsageChunk(7, 3, 2, 1))},
		llmtest.Error(400, "invalid_request_error", "", "", "bad"),
		llmtest.Text("abandoned"),
	)
	rec := &llmRecorder{}
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

	require.Len(t, rec.reqs, 4)
	require.Equal(t, "m", rec.reqs[0].Model)
	require.Equal(t, "127.0.0.1", rec.reqs[0].ServerAddress)
	require.NotZero(t, rec.reqs[0].ServerPort)
	require.Equal(t, observability.ModelStandard, rec.reqs[0].ModelType)
	require.False(t, rec.reqs[0].Stream)
	require.True(t, rec.reqs[1].Stream)
	require.Equal(t, "hello", rec.reqs[0].Messages[0].Content)

	require.Len(t, rec.ends, 2)
	require.Equal(t, int64(5), rec.ends[0].Usage.InputTokens)
	require.Equal(t, []string{"stop"}, rec.ends[0].FinishReasons)
	require.Equal(t, "hi", rec.ends[0].Messages[0].Content)
	require.Equal(t, int64(7), rec.ends[1].Usage.InputTokens)
	require.Equal(t, int64(2), rec.ends[1].Usage.CacheReadInputTokens)
	require.Equal(t, int64(1), rec.ends[1].Usage.ReasoningTokens)
	require.NotZero(t, rec.ends[1].TimeToFirstChunk)
	require.Equal(t, "ab", rec.ends[1].Messages[0].Content)

	require.Len(t, rec.errs, 2)
	require.ErrorIs(t, rec.errs[0], llm.ErrBadRequest)
	require.True(t, errors.Is(rec.errs[1], llm.ErrStreamClosed))
}
