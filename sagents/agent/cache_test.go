package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/agent"
	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// tenTurns runs a task of nine tool calls and a final answer under mode and
// returns the ten request bodies, the result and the usage observed.
func tenTurns(t *testing.T, mode llm.PromptCacheMode) ([][]byte, *agent.Result, []observability.Usage) {
	t.Helper()
	var replies []llmtest.Reply
	for i := 1; i <= 9; i++ {
		ev := []string{
			llmtest.Chunk(0, `{"role":"assistant","content":"Looking."}`, ""),
			llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, fmt.Sprintf("call_%d", i), "file_read",
				fmt.Sprintf(`{"path":"missing-%d.txt"}`, i))), ""),
			llmtest.Chunk(0, `{}`, "tool_calls"),
			llmtest.UsageChunk(1000*i, 20, 900*i, 0),
		}
		replies = append(replies, llmtest.Reply{Events: ev})
	}
	replies = append(replies, llmtest.Reply{Events: append(llmtest.TextEvents("Done."), llmtest.UsageChunk(10000, 5, 9000, 0))})
	srv := llmtest.New(t, replies...)

	rec := &observabilitytest.Recorder{}
	obs := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	client, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"}, Observer: obs,
		Retry: llm.RetryPolicy{MaxAttempts: 1}, PromptCache: mode})
	require.NoError(t, err)
	tm := tools.NewManager(h, tools.Options{Observer: obs})
	require.NoError(t, tm.Register(tools.Builtins(tools.BuiltinOptions{})...))
	a, err := agent.New(agent.Config{Client: client, Tools: tm, Observer: obs, SessionID: "session-7", MaxSteps: 10,
		SystemPrompt: strings.Repeat("You are a careful agent; follow the house rules. ", 12)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := a.Run(ctx, longTask)
	require.NoError(t, err)
	require.Equal(t, "Done.", res.Answer)
	var bodies [][]byte
	for _, r := range srv.Requests() {
		bodies = append(bodies, r.Body)
	}
	require.Len(t, bodies, 10)
	var usage []observability.Usage
	for _, e := range observabilitytest.Data[observability.LLMResponse](rec, "LLMEnd") {
		usage = append(usage, e.Usage)
	}
	return bodies, res, usage
}

// longTask is long enough for a breakpoint of its own when nothing is
// marked; with the agent's marks it is not a segment.
var longTask = "Find the files. " + strings.Repeat("Look in every directory of the workspace. ", 30)

type rawBody struct {
	Messages []json.RawMessage `json:"messages"`
	Tools    json.RawMessage   `json:"tools"`
	Key      *string           `json:"prompt_cache_key"`
}

func decodeBody(t *testing.T, b []byte) rawBody {
	t.Helper()
	var rb rawBody
	require.NoError(t, json.Unmarshal(b, &rb))
	return rb
}

// TestPrefixStableAcrossTurns: with automatic prefix caching (a cache key,
// no markers), every request repeats the previous one's messages and tools
// byte for byte, under one key.
func TestPrefixStableAcrossTurns(t *testing.T) {
	bodies, res, usage := tenTurns(t, llm.PromptCacheKey)
	first := decodeBody(t, bodies[0])
	require.NotNil(t, first.Key)
	require.NotContains(t, *first.Key, "session-7", "the session id is hashed")
	for i := 1; i < len(bodies); i++ {
		prev, cur := decodeBody(t, bodies[i-1]), decodeBody(t, bodies[i])
		require.Greater(t, len(cur.Messages), len(prev.Messages), "turn %d grows the conversation", i)
		for j, m := range prev.Messages {
			require.True(t, bytes.Equal(m, cur.Messages[j]), "turn %d message %d changed:\n%s\n%s", i, j, m, cur.Messages[j])
		}
		require.True(t, bytes.Equal(first.Tools, cur.Tools), "turn %d: the tools changed", i)
		require.Equal(t, *first.Key, *cur.Key, "turn %d: the cache key changed", i)
		require.NotContains(t, string(bodies[i]), "cache_control")
	}

	// Cached tokens reach the result and every llm end event.
	require.Equal(t, 45000+10000, res.Usage.Input)
	require.Equal(t, 40500+9000, res.Usage.Cached)
	require.InDelta(t, 49500.0/55000, res.Usage.CachedShare(), 1e-9)
	require.Len(t, usage, 10)
	for i, u := range usage[:9] {
		require.EqualValues(t, 900*(i+1), u.CacheReadInputTokens)
	}
}

// TestBreakpointsAcrossTurns: with breakpoints, the stable system prompt
// carries a marker on every turn, at most four markers are sent, none on a
// tool message, and the messages' text is stable across turns.
func TestBreakpointsAcrossTurns(t *testing.T) {
	bodies, _, _ := tenTurns(t, llm.PromptCacheBreakpoints)
	var prevText []string
	for i, b := range bodies {
		rb := decodeBody(t, b)
		require.Nil(t, rb.Key, "no key with breakpoints")
		markers := strings.Count(string(b), `"cache_control"`)
		require.LessOrEqual(t, markers, llm.MaxCacheBreakpoints, "turn %d", i)
		var text []string
		for j, raw := range rb.Messages {
			var m struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			}
			require.NoError(t, json.Unmarshal(raw, &m))
			marked := bytes.Contains(raw, []byte(`"cache_control"`))
			if m.Role == "tool" {
				require.False(t, marked, "turn %d: marker on tool message %d", i, j)
			}
			if j == 0 {
				require.True(t, marked, "turn %d: the stable system prompt is a breakpoint", i)
			}
			if j == 1 && i > 0 {
				require.False(t, marked, "turn %d: the unmarked task is no segment once the agent marks the system prompt", i)
			}
			text = append(text, contentText(t, m.Content))
		}
		if i > 0 {
			require.Equal(t, prevText, text[:len(prevText)], "turn %d: earlier messages' text changed", i)
		}
		prevText = text
	}
}

func contentText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 || raw[0] != '[' {
		var s string
		if len(raw) > 0 && string(raw) != "null" {
			require.NoError(t, json.Unmarshal(raw, &s))
		}
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(raw, &parts))
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
