package llm

import (
	"net/http"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetry429WithRetryAfterThenSuccess(t *testing.T) {
	rl := llmtest.Error(429, "requests", "rate_limit_exceeded", "", "Rate limit reached")
	rl.Header = map[string]string{"Retry-After": "2"}
	srv := llmtest.New(t, rl, llmtest.Chat("done"))
	c, sl := newClient(t, srv)
	resp, err := c.Chat(ctxT(t), req("x"))
	require.NoError(t, err)
	assert.Equal(t, "done", resp.Content())
	assert.Equal(t, []time.Duration{2 * time.Second}, sl.got(), "Retry-After is honoured exactly")
}

func TestRetry429StreamThenSuccess(t *testing.T) {
	rl := llmtest.Error(429, "requests", "rate_limit_exceeded", "", "slow down")
	rl.Header = map[string]string{"Retry-After-Ms": "250"}
	srv := llmtest.New(t, rl, llmtest.Text("ok"))
	c, sl := newClient(t, srv)
	resp, err := collect(t, c, req("x"))
	require.NoError(t, err)
	assert.Equal(t, "ok", resp.Content())
	assert.Equal(t, []time.Duration{250 * time.Millisecond}, sl.got())
}

func TestRetryExhaustsAttemptsWithBackoff(t *testing.T) {
	srv := llmtest.New(t)
	c, sl := newClient(t, srv) // fallback is a 500 every time
	_, err := c.Chat(ctxT(t), req("x"))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindServer, e.Kind)
	assert.Equal(t, 4, e.Attempts)
	assert.Equal(t, "test-model", e.Model)
	assert.Len(t, srv.Requests(), 4)
	// Rand()=0.5: half fixed + a quarter: 375ms, 750ms, 1.5s.
	assert.Equal(t, []time.Duration{375 * time.Millisecond, 750 * time.Millisecond, 1500 * time.Millisecond}, sl.got())
}

func TestRetryStatusesRetriedOrNot(t *testing.T) {
	for _, tc := range []struct {
		status int
		retry  bool
	}{{408, true}, {409, true}, {429, true}, {500, true}, {502, true}, {503, true}, {400, false}, {401, false}, {403, false}, {404, false}, {422, false}} {
		srv := llmtest.New(t, llmtest.Error(tc.status, "x", "", "", "failure"), llmtest.Chat("ok"))
		c, _ := newClient(t, srv)
		_, err := c.Chat(ctxT(t), req("x"))
		assert.Equal(t, tc.retry, err == nil, "status %d: %v", tc.status, err)
	}
}

func TestRetryQuotaExceededIsNotRetried(t *testing.T) {
	srv := llmtest.New(t, llmtest.Error(429, "insufficient_quota", "insufficient_quota", "", "You exceeded your current quota"), llmtest.Chat("no"))
	c, _ := newClient(t, srv)
	_, err := c.Chat(ctxT(t), req("x"))
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.Len(t, srv.Requests(), 1)
}

func TestRetryConnectionError(t *testing.T) {
	c, err := New(Config{
		Standard: ModelConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"},
		Retry:    RetryPolicy{MaxAttempts: 2, Sleep: (&sleeps{}).sleep},
	})
	require.NoError(t, err)
	_, err = c.Chat(ctxT(t), req("x"))
	assert.ErrorIs(t, err, ErrConnection)
}

func TestRetryBoundedByTotalTime(t *testing.T) {
	rl := llmtest.Error(503, "server_error", "", "", "busy")
	rl.Header = map[string]string{"Retry-After": "30"}
	srv := llmtest.New(t, rl, llmtest.Chat("late"))
	c, sl := newClient(t, srv, func(cfg *Config) { cfg.Retry.MaxElapsed = 10 * time.Second })
	_, err := c.Chat(ctxT(t), req("x"))
	assert.ErrorIs(t, err, ErrServer)
	assert.Empty(t, sl.got(), "a wait beyond the time budget is not started")
}

func TestRetryAfterAboveCapGivesUp(t *testing.T) {
	p := RetryPolicy{MaxRetryAfter: time.Second}.withDefaults()
	_, ok := nextWait(p, &Error{Kind: KindRateLimited, RetryAfter: time.Hour}, 1, 0)
	assert.False(t, ok)
}

func TestBackoffGrowsAndIsBounded(t *testing.T) {
	p := RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}.withDefaults()
	for attempt := 1; attempt < 10; attempt++ {
		for _, r := range []float64{0, 0.999} {
			p.Rand = func() float64 { return r }
			d := backoff(p, attempt)
			assert.LessOrEqual(t, d, time.Second)
			assert.GreaterOrEqual(t, d, min(100*time.Millisecond<<(attempt-1), time.Second)/2)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "1.5")
	assert.Equal(t, 1500*time.Millisecond, parseRetryAfter(h, now))
	h.Set("Retry-After", now.Add(3*time.Second).Format(http.TimeFormat))
	assert.Equal(t, 3*time.Second, parseRetryAfter(h, now))
	h.Set("Retry-After", "garbage")
	assert.Zero(t, parseRetryAfter(h, now))
	h.Set("Retry-After-Ms", "20")
	assert.Equal(t, 20*time.Millisecond, parseRetryAfter(h, now))
}
