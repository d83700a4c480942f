package llm

import (
	"errors"
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func limited(l ResponseLimits) func(*Config) { return func(c *Config) { c.Limits = l } }

func TestStreamBytesLimitKeepsWhatCameBefore(t *testing.T) {
	srv := llmtest.New(t, llmtest.Text("hello", strings.Repeat("x", 64)))
	c, _ := newClient(t, srv, limited(ResponseLimits{Bytes: 32}))
	_, err := collect(t, c, req("x"))
	require.ErrorIs(t, err, ErrResponseTooLarge)
	var pe *PartialStreamError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "hello", pe.Partial.Content())
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindResponseTooLarge, e.Kind)
	assert.False(t, e.Retryable())
}

func TestStreamTooLargeBeforeFirstChunkIsNotRetried(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Events: []string{llmtest.Chunk(0, `{"reasoning_content":"`+strings.Repeat("r", 100)+`"}`, "")}}
	})
	c, _ := newClient(t, srv, limited(ResponseLimits{Bytes: 50}))
	_, err := c.ChatStream(ctxT(t), req("x"))
	require.ErrorIs(t, err, ErrResponseTooLarge)
	var pe *PartialStreamError
	assert.False(t, errors.As(err, &pe))
	assert.Len(t, srv.Requests(), 1)
}

func TestStreamChoicesLimit(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Events: []string{
		llmtest.Chunk(0, `{"content":"a"}`, ""), llmtest.Chunk(7, `{"content":"b"}`, ""),
		llmtest.Chunk(900, `{"content":"c"}`, "stop")}})
	c, _ := newClient(t, srv, limited(ResponseLimits{Choices: 2}))
	_, err := collect(t, c, req("x"))
	require.ErrorIs(t, err, ErrResponseTooLarge)
	var pe *PartialStreamError
	require.ErrorAs(t, err, &pe)
	assert.Len(t, pe.Partial.Choices, 2)
}

func TestStreamToolCallsLimit(t *testing.T) {
	var ev []string
	for i := range 3 {
		ev = append(ev, llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(i, "c"+string(rune('a'+i)), "f", `{}`)), ""))
	}
	srv := llmtest.New(t, llmtest.Reply{Events: ev})
	c, _ := newClient(t, srv, limited(ResponseLimits{ToolCalls: 2}))
	_, err := collect(t, c, req("x"))
	require.ErrorIs(t, err, ErrResponseTooLarge)
	assert.Contains(t, err.Error(), "more than 2 tool calls")
}

func TestChatBodyLimit(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Chat(strings.Repeat("y", 500)) })
	c, _ := newClient(t, srv, limited(ResponseLimits{Bytes: 200}))
	_, err := c.Chat(ctxT(t), req("x"))
	require.ErrorIs(t, err, ErrResponseTooLarge)
	assert.Len(t, srv.Requests(), 1)
}

func TestDefaultLimits(t *testing.T) {
	assert.Equal(t, ResponseLimits{Bytes: 16 << 20, Choices: 128, ToolCalls: 1024}, ResponseLimits{}.withDefaults())
}

func TestStreamEventTooLargeIsNotAConnectionError(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Raw: "data: " + strings.Repeat("x", maxEventSize+1) + "\n\n"}
	})
	c, _ := newClient(t, srv)
	_, err := c.ChatStream(ctxT(t), req("x"))
	require.ErrorIs(t, err, ErrResponseTooLarge)
	require.ErrorIs(t, err, ErrEventTooLarge)
	assert.NotErrorIs(t, err, ErrConnection)
	assert.Len(t, srv.Requests(), 1, "not retried")
}

func TestErrorBodyIsBounded(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Status: 400, Body: `{"error":{"message":"` + strings.Repeat("z", 3<<20) + `"}}`})
	c, _ := newClient(t, srv)
	_, err := c.Chat(ctxT(t), req("x"))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindBadRequest, e.Kind)
	assert.Less(t, len(e.Message), 1<<10, "a truncated body is reported by its start")
	assert.True(t, strings.HasPrefix(e.Message, `{"error":{"message":"zzz`))
}
