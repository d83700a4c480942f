package llm

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func collect(t *testing.T, c *Client, r Request) (*Response, error) {
	t.Helper()
	s, err := c.ChatStream(ctxT(t), r)
	if err != nil {
		return nil, err
	}
	return s.Collect()
}

func streamOf(t *testing.T, events ...string) (*Response, error) {
	t.Helper()
	srv := llmtest.New(t, llmtest.Reply{Events: events})
	c, _ := newClient(t, srv)
	return collect(t, c, req("x"))
}

func TestStreamTextUsageChunkWithEmptyChoices(t *testing.T) {
	ev := append(llmtest.TextEvents("Hel", "lo"), llmtest.UsageChunk(11, 7, 3, 2))
	resp, err := streamOf(t, ev...)
	require.NoError(t, err)
	assert.Equal(t, "Hello", resp.Content())
	assert.Equal(t, Usage{Input: 11, Output: 7, Cached: 3, Reasoning: 2, Total: 18}, resp.Usage)
	assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
	assert.Equal(t, "assistant", resp.Choices[0].Message.Role)
	assert.Equal(t, "chatcmpl-1", resp.ID)
}

func TestStreamCommentsAndKeepAlives(t *testing.T) {
	resp, err := streamOf(t, ": OPENROUTER PROCESSING", llmtest.Chunk(0, `{"content":"a"}`, ""),
		": keep-alive", ": keep-alive", llmtest.Chunk(0, `{"content":"b"}`, "stop"))
	require.NoError(t, err)
	assert.Equal(t, "ab", resp.Content())
}

func TestStreamManyKeepAlivesBeyondGoOpenAILimit(t *testing.T) {
	ev := []string{}
	for range 400 { // go-openai gives up after 300 "empty" lines
		ev = append(ev, ": ping")
	}
	ev = append(ev, llmtest.TextEvents("ok")...)
	resp, err := streamOf(t, ev...)
	require.NoError(t, err)
	assert.Equal(t, "ok", resp.Content())
}

func TestStreamReasoningDeltas(t *testing.T) {
	resp, err := streamOf(t,
		llmtest.Chunk(0, `{"role":"assistant","reasoning_content":"think "}`, ""),
		llmtest.Chunk(0, `{"reasoning":"more"}`, ""),
		llmtest.Chunk(0, `{"content":"answer"}`, "stop"))
	require.NoError(t, err)
	assert.Equal(t, "think more", resp.Choices[0].Message.ReasoningContent)
	assert.Equal(t, "answer", resp.Content())
}

func TestStreamToolCallsSparseHighIndexes(t *testing.T) {
	resp, err := streamOf(t,
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(5, "call_b", "b", "")), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(2, "call_a", "a", `{"x":`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(5, "", "", `{"y":2}`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(2, "", "", `1}`)), ""),
		llmtest.Chunk(0, `{}`, "tool_calls"))
	require.NoError(t, err)
	calls := resp.Choices[0].ToolCalls
	require.Len(t, calls, 2)
	assert.Equal(t, ToolCall{Index: 2, ID: "call_a", Type: "function", Name: "a", Arguments: []byte(`{"x":1}`), Raw: `{"x":1}`}, calls[0])
	assert.Equal(t, ToolCall{Index: 5, ID: "call_b", Type: "function", Name: "b", Arguments: []byte(`{"y":2}`), Raw: `{"y":2}`}, calls[1])
	assert.Equal(t, "tool_calls", string(resp.Choices[0].FinishReason))
	msg := resp.Choices[0].Message
	require.Len(t, msg.ToolCalls, 2)
	assert.Nil(t, msg.ToolCalls[0].Index, "message tool calls are ready to send back")
	assert.Equal(t, `{"x":1}`, msg.ToolCalls[0].Function.Arguments)
}

func TestStreamTwoFragmentsOfOneIndexInOneChunk(t *testing.T) {
	resp, err := streamOf(t,
		llmtest.Chunk(0, llmtest.ToolCalls(
			llmtest.ToolCallDelta(0, "c1", "f", `{"a"`),
			llmtest.ToolCallDelta(0, "", "", `:1}`)), "tool_calls"))
	require.NoError(t, err)
	require.Len(t, resp.Choices[0].ToolCalls, 1)
	assert.JSONEq(t, `{"a":1}`, string(resp.Choices[0].ToolCalls[0].Arguments))
}

func TestStreamToolCallsWithoutIndexFallBackToIDThenPosition(t *testing.T) {
	resp, err := streamOf(t,
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(-1, "c1", "f", `{"a":`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(-1, "", "", `1}`)), ""), // position: last call
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(-1, "c2", "g", `{"b":`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(-1, "c2", "", `2}`)), ""), // by id
		llmtest.Chunk(0, `{}`, "tool_calls"))
	require.NoError(t, err)
	calls := resp.Choices[0].ToolCalls
	require.Len(t, calls, 2)
	assert.Equal(t, "f", calls[0].Name)
	assert.JSONEq(t, `{"a":1}`, string(calls[0].Arguments))
	assert.Equal(t, "g", calls[1].Name)
	assert.JSONEq(t, `{"b":2}`, string(calls[1].Arguments))
	assert.Equal(t, []int{0, 1}, []int{calls[0].Index, calls[1].Index})
}

func TestStreamIndexZeroReusedWithNewID(t *testing.T) {
	// Some servers send index 0 for every call; a new id starts a new call.
	resp, err := streamOf(t,
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "c1", "f", `{}`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "c2", "g", `{"z":`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "", "", `0}`)), "tool_calls"))
	require.NoError(t, err)
	calls := resp.Choices[0].ToolCalls
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"c1", "c2"}, []string{calls[0].ID, calls[1].ID})
	assert.JSONEq(t, `{"z":0}`, string(calls[1].Arguments))
}

func TestStreamInvalidArgumentsReportedWithRawText(t *testing.T) {
	resp, err := streamOf(t,
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "c1", "f", `{"a": tru`)), "tool_calls"))
	require.NoError(t, err)
	tc := resp.Choices[0].ToolCalls[0]
	require.NotNil(t, tc.ArgumentsErr)
	assert.Equal(t, `{"a": tru`, tc.ArgumentsErr.Raw)
	assert.Nil(t, tc.Arguments)
	assert.Contains(t, tc.ArgumentsErr.Error(), `{\"a\": tru`)
}

func TestStreamEmptyArgumentsBecomeEmptyObject(t *testing.T) {
	resp, err := streamOf(t, llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "c1", "now", ``)), "tool_calls"))
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(resp.Choices[0].ToolCalls[0].Arguments))
}

func TestStreamMultipleChoicesOrdered(t *testing.T) {
	resp, err := streamOf(t,
		llmtest.Chunk(1, `{"content":"B"}`, ""), llmtest.Chunk(0, `{"content":"A"}`, ""),
		llmtest.Chunk(1, `{}`, "length"), llmtest.Chunk(0, `{}`, "stop"))
	require.NoError(t, err)
	require.Len(t, resp.Choices, 2)
	assert.Equal(t, "A", resp.Choices[0].Message.Content)
	assert.Equal(t, "B", resp.Choices[1].Message.Content)
	assert.Equal(t, "stop,length", string(resp.FinishReasons()[0])+","+string(resp.FinishReasons()[1]))
}

func TestStreamMidStreamErrorIsPartial(t *testing.T) {
	resp, err := streamOf(t, llmtest.Chunk(0, `{"content":"par"}`, ""),
		`{"error":{"message":"The server had an error","type":"server_error","param":null,"code":500}}`)
	assert.Nil(t, resp)
	var pe *PartialStreamError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "par", pe.Partial.Content())
	assert.Equal(t, 1, pe.Chunks)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindServer, e.Kind)
	assert.Equal(t, 500, e.StatusCode)
}

func TestStreamErrorEventBeforeFirstChunkIsRetried(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Reply{Events: []string{"event: error", `{"error":{"message":"overloaded","type":"server_error","code":"server_error"}}`}},
		llmtest.Text("fine"))
	c, sl := newClient(t, srv)
	resp, err := collect(t, c, req("x"))
	require.NoError(t, err)
	assert.Equal(t, "fine", resp.Content())
	assert.Len(t, sl.got(), 1)
}

func TestStream500BeforeFirstChunkThenHangupAfter(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Error(500, "server_error", "", "", "boom"),
		llmtest.Reply{Events: []string{llmtest.Chunk(0, `{"content":"half"}`, "")}, Hangup: true})
	c, sl := newClient(t, srv)
	s, err := c.ChatStream(ctxT(t), req("x"))
	require.NoError(t, err)
	assert.Len(t, sl.got(), 1, "the 500 was retried")
	_, err = s.Collect()
	var pe *PartialStreamError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "half", pe.Partial.Content())
	assert.ErrorIs(t, err, ErrConnection)
	assert.Len(t, srv.Requests(), 2, "no retry after the first chunk")
}

func TestStreamEndsWithoutDoneAfterFinishIsComplete(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Events: llmtest.TextEvents("x"), NoDone: true})
	c, _ := newClient(t, srv)
	resp, err := collect(t, c, req("x"))
	require.NoError(t, err)
	assert.Equal(t, "x", resp.Content())
}

func TestStreamEndsWithoutDoneOrFinishIsUnexpectedEOF(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Events: []string{llmtest.Chunk(0, `{"content":"x"}`, "")}, NoDone: true})
	c, _ := newClient(t, srv)
	_, err := collect(t, c, req("x"))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestStreamSlowFirstByteTTFT(t *testing.T) {
	const delay = 150 * time.Millisecond
	srv := llmtest.New(t, llmtest.Reply{Events: llmtest.TextEvents("late"), HeaderDelay: delay})
	c, _ := newClient(t, srv)
	s, err := c.ChatStream(ctxT(t), req("x"))
	require.NoError(t, err)
	resp, err := s.Collect()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, resp.TTFT, delay, "TTFT covers the slow first byte")
	assert.GreaterOrEqual(t, resp.Latency, resp.TTFT)
}

func TestStreamFirstChunkTimeoutRetries(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Reply{Events: llmtest.TextEvents("never"), HeaderDelay: 5 * time.Second})
	// Later attempts answer at once; on a loaded machine one may still miss
	// the deadline, so only "at least one retry" is asserted.
	srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Text("quick") })
	c, sl := newClient(t, srv, func(cfg *Config) { cfg.FirstChunkTimeout = 300 * time.Millisecond })
	resp, err := collect(t, c, req("x"))
	require.NoError(t, err)
	assert.Equal(t, "quick", resp.Content())
	assert.NotEmpty(t, sl.got())
}

func TestStreamCallerCancelIsNotRetried(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Events: llmtest.TextEvents("x"), HeaderDelay: 5 * time.Second})
	c, sl := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.ChatStream(ctx, req("x"))
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Empty(t, sl.got())
}

func TestStreamRecvDeliversChunksInOrder(t *testing.T) {
	srv := llmtest.New(t, llmtest.Text("a", "b"))
	c, _ := newClient(t, srv)
	s, err := c.ChatStream(ctxT(t), req("x"))
	require.NoError(t, err)
	defer s.Close()
	var got string
	n := 0
	for {
		ch, err := s.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		n++
		for _, c := range ch.Choices {
			got += c.Delta.Content
		}
	}
	assert.Equal(t, "ab", got)
	assert.Equal(t, 4, n)
	_, err = s.Recv()
	assert.Equal(t, io.EOF, err)
	assert.Greater(t, s.TTFT(), time.Duration(0))
}

func TestStreamDataLinesWithoutBlankLines(t *testing.T) {
	// Some servers put each chunk on its own data: line with no blank line.
	body := "data: " + llmtest.Chunk(0, `{"content":"a"}`, "") + "\ndata: " + llmtest.Chunk(0, `{"content":"b"}`, "stop") + "\n\n"
	ev, err := readAllEvents(body)
	require.NoError(t, err)
	assert.Equal(t, "ab", ev.Content())
}
