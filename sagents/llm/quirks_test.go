package llm

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixtures in testdata/ are hand-written, one per provider quirk, in the
// shape the provider sends.

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type wantCall struct{ id, name, args string }

type wantErr struct {
	kind     Kind
	code     string
	status   int
	contains string
	partial  bool
	requests int
}

// meaning is what a response says, as a caller reads it.
type meaning struct {
	content   []string
	finish    []string
	reasoning string
	refusal   string
	calls     []wantCall
	usage     Usage
}

func meaningOf(resp *Response) meaning {
	var m meaning
	if resp == nil {
		return m
	}
	for i, ch := range resp.Choices {
		m.content = append(m.content, ch.Message.Content)
		m.finish = append(m.finish, string(ch.FinishReason))
		if i > 0 {
			continue
		}
		m.reasoning, m.refusal = ch.Message.ReasoningContent, ch.Message.Refusal
		for _, tc := range ch.ToolCalls {
			m.calls = append(m.calls, wantCall{tc.ID, tc.Name, tc.Raw})
		}
	}
	m.usage = resp.Usage
	return m
}

// replay serves body to every request and reads the stream to its end.
func replay(t *testing.T, body string) (*Response, error, int) {
	t.Helper()
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Raw: body} })
	c, _ := newClient(t, srv)
	s, err := c.ChatStream(ctxT(t), req("x"))
	if err != nil {
		return nil, err, len(srv.Requests())
	}
	resp, err := s.Collect()
	return resp, err, len(srv.Requests())
}

func checkErr(t *testing.T, err error, w *wantErr, requests int) *Response {
	t.Helper()
	if w == nil {
		require.NoError(t, err)
		return nil
	}
	require.Error(t, err)
	var pe *PartialStreamError
	assert.Equal(t, w.partial, errors.As(err, &pe), "partial output kept: %v", err)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, w.kind, e.Kind, "kind of %v", err)
	assert.Equal(t, w.code, e.Code)
	assert.Equal(t, w.status, e.StatusCode)
	assert.Contains(t, e.Message, w.contains)
	assert.NotContains(t, e.Message, `{"error"`, "the message is the server's text, not its envelope")
	if w.requests > 0 {
		assert.Equal(t, w.requests, requests, "requests sent")
	}
	if pe != nil {
		return pe.Partial
	}
	return nil
}

type streamCase struct {
	file string
	want meaning
	err  *wantErr
}

func runStreamCases(t *testing.T, tests []streamCase) {
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".sse"), func(t *testing.T) {
			resp, err, n := replay(t, fixture(t, tt.file))
			if p := checkErr(t, err, tt.err, n); p != nil {
				resp = p
			}
			assert.Equal(t, tt.want, meaningOf(resp))
		})
	}
}

// TestStreamQuirks: each row is a shape today's providers send that the
// reader used to get wrong.
func TestStreamQuirks(t *testing.T) {
	runStreamCases(t, []streamCase{
		{file: "mirrored-reasoning.sse", want: meaning{
			content: []string{"Four."}, finish: []string{"stop"}, reasoning: "Count the legs.",
		}},
		{file: "content-parts.sse", want: meaning{
			content: []string{"Hi there"}, finish: []string{"stop"}, reasoning: "Plan: greet back",
			usage: Usage{Input: 4, Output: 9, Total: 13},
		}},
		{file: "reasoning-details.sse", want: meaning{
			content: []string{"42"}, finish: []string{""}, reasoning: "6 by 7 is 42",
			usage: Usage{Input: 10, Output: 5, Total: 15},
		}},
		{file: "event-error-envelope.sse", want: meaning{
			content: []string{""}, finish: []string{""}, reasoning: "Call the tool",
		}, err: &wantErr{kind: KindBadRequest, code: "tool_use_failed", status: 400,
			contains: "Tool arguments did not match the schema", partial: true, requests: 1}},
		{file: "inband-error-with-usage.sse", want: meaning{
			content: []string{"Partial"}, finish: []string{"length"},
			usage: Usage{Input: 7, Output: 2, Reasoning: 1, Total: 9},
		}, err: &wantErr{kind: KindBadRequest, code: "400", status: 400, contains: "Output budget exhausted", partial: true}},
		{file: "error-field.sse", err: &wantErr{kind: KindContextWindow, code: "400", status: 400,
			contains: "the context size is 4096", requests: 1}},
		{file: "inband-bad-key.sse", err: &wantErr{kind: KindAuth, code: "invalid argument",
			contains: "Invalid API key given", requests: 1}},
		{file: "inband-unrecognised.sse", err: &wantErr{kind: KindUnknown,
			contains: "the moon is in the wrong phase", requests: 1}},
		// Groq, when stream_options was not sent, reports usage only in
		// x_groq.usage of the last chunk (the old reader saw 0/0/0).
		{file: "groq-usage-in-xgroq.sse", want: meaning{
			content: []string{"Here is the plan."}, finish: []string{"stop"},
			usage: Usage{Input: 21, Output: 988, Total: 1009},
		}},
		// A proxy that routes /chat/completions to the Responses API: the
		// old reader counted its events as chunks and failed with "stream
		// interrupted: unexpected EOF"; it is said for what it is, once.
		{file: "responses-api-on-chat.sse", err: &wantErr{kind: KindBadRequest,
			contains: `Responses API event stream (event "response.created")`, requests: 1}},
	})
}

// TestGatewayErrorKeepsUpstreamCause: OpenRouter's 429 "Provider returned
// error" keeps the upstream's reason in error.metadata.raw (and the
// upstream's name in provider_name); the message carries both (the old
// one was only "Provider returned error").
func TestGatewayErrorKeepsUpstreamCause(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: 429, Body: fixture(t, "error-openrouter-upstream.json")}
	})
	c, _ := newClient(t, srv)
	_, err := c.Chat(ctxT(t), req("x"))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindRateLimited, e.Kind)
	assert.Equal(t, 429, e.StatusCode)
	assert.Equal(t, "Provider returned error: Chutes: mistralai/devstral-small:free is temporarily rate-limited upstream. "+
		"Please retry shortly, or add your own key to accumulate your rate limits.", e.Message)
	// A metadata.raw that is the upstream's JSON error gives its message.
	e2, ok := parseErrorBody([]byte(`{"error":{"message":"Provider returned error","code":400,` +
		`"metadata":{"raw":"{\"error\":{\"message\":\"max_tokens is too large\"}}"}}}`))
	require.True(t, ok)
	assert.Equal(t, "Provider returned error: max_tokens is too large", e2.Message)
}

// TestResponsesAPIBodyOnChat: the same proxy answering a non-streaming
// chat completions request with a Responses API body (object "response")
// is an error saying so, not an empty answer.
func TestResponsesAPIBodyOnChat(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Body: fixture(t, "body-responses-api.json")} })
	c, _ := newClient(t, srv)
	resp, err := c.Chat(ctxT(t), req("x"))
	assert.Nil(t, resp)
	require.ErrorIs(t, err, ErrResponsesAPI)
	assert.ErrorContains(t, err, "/chat/completions endpoint")
	assert.Len(t, srv.Requests(), 1, "not retried")
}

// TestQuirkGuards holds shapes the old reader already got right and the new
// one must not break: reasoning sent in "reasoning" and mirrored in
// reasoning_details is not doubled, a tool call with extra fields keeps its
// meaning, a mirrored non-streaming reasoning is not doubled, and a
// transient in-band error is still retried.
func TestQuirkGuards(t *testing.T) {
	runStreamCases(t, []streamCase{
		{file: "reasoning-and-details.sse", want: meaning{
			content: []string{"2"}, finish: []string{"stop"}, reasoning: "Short sum.",
		}},
		{file: "tool-call-extra.sse", want: meaning{
			content: []string{""}, finish: []string{""},
			calls: []wantCall{{"tc-1", "read", `{"path":"a/b.go"}`}},
			usage: Usage{Input: 20, Output: 6, Total: 26},
		}},
	})
	t.Run("overloaded is retried", func(t *testing.T) {
		_, err, n := replay(t, fixture(t, "inband-overloaded.sse"))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, KindServer, e.Kind)
		assert.Equal(t, 4, n)
		assert.Equal(t, "Model is overloaded, please retry", e.Message)
	})
	t.Run("mirrored body reasoning", func(t *testing.T) {
		srv := llmtest.New(t, llmtest.Reply{Body: fixture(t, "body-reasoning-mirrored.json")})
		c, _ := newClient(t, srv)
		resp, err := c.Chat(ctxT(t), req("x"))
		require.NoError(t, err)
		assert.Equal(t, meaning{content: []string{""}, finish: []string{"tool_calls"},
			reasoning: "Add, then negate.",
			calls:     []wantCall{{"t-a", "add", `{"a":1,"b":2}`}, {"t-b", "neg", `{"a":3}`}},
			usage:     Usage{Input: 50, Output: 20, Total: 70}}, meaningOf(resp))
	})
}

// Content parts reach Recv's callers as plain deltas: the agent prints
// Delta.Content as it arrives.
func TestStreamContentPartsDeltas(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Raw: fixture(t, "content-parts.sse")})
	c, _ := newClient(t, srv)
	s, err := c.ChatStream(ctxT(t), req("x"))
	require.NoError(t, err)
	defer s.Close()
	var text, thinking strings.Builder
	for {
		ch, err := s.Recv()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			thinking.WriteString(c.Delta.ReasoningContent)
		}
	}
	assert.Equal(t, "Hi there", text.String())
	assert.Equal(t, "Plan: greet back", thinking.String())
}

func TestChatBodyQuirks(t *testing.T) {
	tests := []struct {
		file string
		want meaning
	}{
		{"body-reasoning-only.json", meaning{content: []string{"No mail access here."}, finish: []string{"stop"},
			reasoning: "There is no mail tool, so say so.", usage: Usage{Input: 30, Output: 12, Total: 42}}},
		{"body-content-parts.json", meaning{content: []string{"Look both ways."}, finish: []string{"stop"},
			reasoning: "Look left, then right.", usage: Usage{Input: 5, Output: 8, Total: 13}}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".json"), func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Reply{Body: fixture(t, tt.file)})
			c, _ := newClient(t, srv)
			resp, err := c.Chat(ctxT(t), req("x"))
			require.NoError(t, err)
			assert.Equal(t, tt.want, meaningOf(resp))
		})
	}
}

func TestErrorBodyQuirks(t *testing.T) {
	tests := []struct {
		file    string
		status  int
		kind    Kind
		code    string
		message string
	}{
		{"error-null-code.json", 404, KindNotFound, "", `model "tiny" not found, pull it first`},
		{"error-toplevel.json", 400, KindContextWindow, "400",
			"This model's maximum context length is 2048 tokens. However, you requested 3000 tokens."},
		{"error-context-size.json", 400, KindContextWindow, "400",
			"request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it"},
		{"error-string.json", 422, KindBadRequest, "",
			"Input validation error: inputs tokens + max_new_tokens must be <= 4096"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".json"), func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Reply{Status: tt.status, Body: fixture(t, tt.file)})
			c, _ := newClient(t, srv)
			_, err := c.Chat(ctxT(t), req("x"))
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tt.kind, e.Kind)
			assert.Equal(t, tt.status, e.StatusCode)
			assert.Equal(t, tt.code, e.Code)
			assert.Equal(t, tt.message, e.Message)
			assert.Len(t, srv.Requests(), 1)
		})
	}
}

// Some gateways answer 200 with an error object and no choices; that is the
// error, not an empty response.
func TestChatErrorInsideA200Body(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Body: fixture(t, "body-error-200.json")} })
	c, _ := newClient(t, srv)
	resp, err := c.Chat(ctxT(t), req("x"))
	assert.Nil(t, resp)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindServer, e.Kind)
	assert.Equal(t, 502, e.StatusCode)
	assert.Equal(t, "Provider returned error: upstream model is overloaded", e.Message)
	assert.Len(t, srv.Requests(), 4, "a server error is retried")
}

// Gemini 3 needs a tool call's extra_content back on the next turn: the
// client keeps it from the stream and the transport adds it to the
// assistant message that carries the call.
func TestToolCallExtraSentBack(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Raw: fixture(t, "tool-call-extra.sse")}, llmtest.Text("done"))
	c, _ := newClient(t, srv)
	resp, err := collect(t, c, req("read it"))
	require.NoError(t, err)
	require.Len(t, resp.Choices[0].ToolCalls, 1)
	tc := resp.Choices[0].ToolCalls[0]
	assert.JSONEq(t, `{"google":{"thought_signature":"c2lnbmF0dXJlLTE="}}`, string(tc.Extra["extra_content"]))

	next := req("read it")
	next.Messages = append(next.Messages, resp.Choices[0].Message,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: "package b"})
	_, err = collect(t, c, next)
	require.NoError(t, err)
	sent := srv.Last(t).JSON(t)
	msgs := sent["messages"].([]any)
	calls := msgs[1].(map[string]any)["tool_calls"].([]any)
	call := calls[0].(map[string]any)
	assert.Equal(t, "tc-1", call["id"])
	assert.Equal(t, map[string]any{"google": map[string]any{"thought_signature": "c2lnbmF0dXJlLTE="}}, call["extra_content"])
	assert.Equal(t, `{"path":"a/b.go"}`, call["function"].(map[string]any)["arguments"])
}

// A conversation restored from storage gives the fields itself; a
// non-streaming response's call extras are remembered too.
func TestToolCallExtraFromRequestAndChat(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Body: fixture(t, "body-reasoning-mirrored.json")}, llmtest.Chat("ok"), llmtest.Chat("ok"))
	c, _ := newClient(t, srv)
	resp, err := c.Chat(ctxT(t), req("x"))
	require.NoError(t, err)
	assert.Nil(t, resp.Choices[0].ToolCalls[0].Extra)
	assert.JSONEq(t, `{"google":{"thought_signature":"c2ln"}}`, string(resp.Choices[0].ToolCalls[1].Extra["extra_content"]))

	next := req("x")
	next.Messages = append(next.Messages, resp.Choices[0].Message)
	_, err = c.Chat(ctxT(t), next)
	require.NoError(t, err)
	calls := srv.Last(t).JSON(t)["messages"].([]any)[1].(map[string]any)["tool_calls"].([]any)
	assert.NotContains(t, calls[0].(map[string]any), "extra_content")
	assert.Contains(t, calls[1].(map[string]any), "extra_content")

	fresh, _ := newClient(t, srv)
	restored := req("x")
	restored.Messages = append(restored.Messages, resp.Choices[0].Message)
	restored.ToolCallExtra = map[string]map[string]json.RawMessage{"t-a": {"x_sig": json.RawMessage(`"abc"`)}}
	_, err = fresh.Chat(ctxT(t), restored)
	require.NoError(t, err)
	calls = srv.Last(t).JSON(t)["messages"].([]any)[1].(map[string]any)["tool_calls"].([]any)
	assert.Equal(t, "abc", calls[0].(map[string]any)["x_sig"])
	assert.NotContains(t, calls[1].(map[string]any), "extra_content", "a new client has not seen the response")
}
