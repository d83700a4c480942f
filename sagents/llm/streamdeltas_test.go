package llm

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/llm/llmtest"
)

// TestCollectDeltas: the first choice's text and reasoning come in order
// (a second choice and empty deltas are left out) and the response is
// the whole; fn's error stops the stream.
func TestCollectDeltas(t *testing.T) {
	ev := []string{llmtest.Chunk(0, `{"role":"assistant","reasoning_content":"hm "}`, ""), llmtest.Chunk(1, `{"content":"other"}`, ""),
		llmtest.Chunk(0, `{"content":""}`, ""), llmtest.Chunk(0, `{"content":"he"}`, ""), llmtest.Chunk(0, `{"content":"llo"}`, "stop")}
	srv := llmtest.New(t, llmtest.Reply{Events: ev}, llmtest.Reply{Events: ev})
	c, _ := newClient(t, srv)
	s, err := c.ChatStream(ctxT(t), req("x"))
	require.NoError(t, err)
	var got []string
	resp, err := s.CollectDeltas(func(content, reasoning string) error {
		got = append(got, content+"|"+reasoning)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"|hm ", "he|", "llo|"}, got)
	assert.Equal(t, "hello", resp.Content())

	s, err = c.ChatStream(ctxT(t), req("x"))
	require.NoError(t, err)
	stop := errors.New("enough")
	_, err = s.CollectDeltas(func(string, string) error { return stop })
	assert.ErrorIs(t, err, stop)
}
