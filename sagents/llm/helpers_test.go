package llm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	openai "github.com/sashabaranov/go-openai"
)

// sleeps records the waits the retry loop asked for, without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newClient(t *testing.T, srv *llmtest.Server, edit ...func(*Config)) (*Client, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	cfg := Config{
		Standard: ModelConfig{BaseURL: srv.URL, APIKey: "sk-test", Model: "test-model"},
		Retry:    RetryPolicy{Sleep: sl.sleep, Rand: func() float64 { return 0.5 }},
	}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, sl
}

func userMsg(s string) []openai.ChatCompletionMessage {
	return []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: s}}
}

func req(s string) Request {
	return Request{ChatCompletionRequest: openai.ChatCompletionRequest{Messages: userMsg(s)}}
}

func ptr[T any](v T) *T { return &v }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
