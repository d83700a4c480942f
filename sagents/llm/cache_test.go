package llm

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/llm/llmtest"
)

var updateCacheGolden = flag.Bool("update-cache-golden", false, "rewrite testdata/cache/*.json from the bodies sent")

// routeTo sends every request, whatever its host, to the fake server, so
// that a client configured with a provider's real base URL can be tested.
type routeTo struct{ target *url.URL }

func (r routeTo) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host, out.Host = r.target.Scheme, r.target.Host, ""
	return http.DefaultTransport.RoundTrip(out)
}

// providerClient is a client for model at baseURL whose requests reach srv.
func providerClient(t *testing.T, srv *llmtest.Server, baseURL, model string, edit ...func(*Config)) *Client {
	t.Helper()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return mustClient(t, baseURL, model, &http.Client{Transport: routeTo{u}}, edit...)
}

func mustClient(t *testing.T, baseURL, model string, hc *http.Client, edit ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		Standard:    ModelConfig{BaseURL: baseURL, APIKey: "sk-test", Model: model},
		HTTPClient:  hc,
		Retry:       RetryPolicy{MaxAttempts: 1},
		PromptCache: PromptCacheAuto,
	}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	return c
}

var (
	longSystem = strings.Repeat("Stable rules. ", 43)              // 602 characters
	longUser   = strings.Repeat("Fix the parser in main.go. ", 45) // 1215 characters
	longTool   = strings.Repeat("line of output\n", 100)
)

// conversation is an agent's conversation after one tool call.
func conversation() []openai.ChatCompletionMessage {
	return []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: longSystem},
		{Role: openai.ChatMessageRoleUser, Content: longUser},
		{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: "call_1", Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: "file_read", Arguments: `{"path":"main.go"}`}}}},
		{Role: openai.ChatMessageRoleTool, ToolCallID: "call_1", Content: longTool},
		{Role: openai.ChatMessageRoleAssistant, Content: "Read it."},
		{Role: openai.ChatMessageRoleUser, Content: "Now fix the bug."},
	}
}

func cachedRequest(marked bool) Request {
	r := Request{}
	r.Messages = conversation()
	r.Tools = []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "file_read",
		Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}}
	r.CacheKey = "session-1"
	if marked {
		r.Stability = []Stability{Stable}
		r.ToolsStability = Stable
	}
	return r
}

// sentCache is what a body says about caching, field by field.
type sentCache struct {
	marked   []int // messages carrying cache_control
	key      string
	hasKey   bool
	markers  int
	stringed []int // messages whose content is a plain string
}

func inspectCache(t *testing.T, body []byte) sentCache {
	t.Helper()
	var b struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Key *string `json:"prompt_cache_key"`
	}
	require.NoError(t, json.Unmarshal(body, &b))
	var s sentCache
	if b.Key != nil {
		s.key, s.hasKey = *b.Key, true
	}
	for i, m := range b.Messages {
		if len(m.Content) > 0 && m.Content[0] == '"' {
			s.stringed = append(s.stringed, i)
			continue
		}
		var parts []map[string]json.RawMessage
		if len(m.Content) > 0 && m.Content[0] == '[' {
			require.NoError(t, json.Unmarshal(m.Content, &parts))
		}
		for j, p := range parts {
			cc, ok := p["cache_control"]
			if !ok {
				continue
			}
			s.markers++
			assert.JSONEq(t, `{"type":"ephemeral"}`, string(cc))
			assert.Equal(t, len(parts)-1, j, "the marker sits on the last part of message %d", i)
			assert.NotEqual(t, "tool", m.Role, "no marker on tool message %d", i)
			s.marked = append(s.marked, i)
		}
	}
	return s
}

func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	path := filepath.Join("testdata", "cache", name+".json")
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, body, "", "  "))
	pretty.WriteByte('\n')
	if *updateCacheGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, pretty.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, want))
	assert.Equal(t, compact.String(), string(body), "the exact body sent, against %s", path)
}

func TestPromptCacheRequestBodies(t *testing.T) {
	for _, tc := range []struct {
		name, baseURL, model string
		marked               bool
		wantMarked           []int
		wantKey              bool
	}{
		// Breakpoints, with marks: the stable system prompt and the tail.
		{"openrouter-claude", "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4", true, []int{0, 5}, false},
		{"openrouter-gemini", "https://openrouter.ai/api/v1", "google/gemini-2.5-pro", true, []int{0, 5}, false},
		{"anthropic", "https://api.anthropic.com/v1", "claude-sonnet-4-5", true, []int{0, 5}, false},
		// Breakpoints, unmarked: the longest system and user messages, the tail.
		{"dashscope-qwen", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "qwen-max", false, []int{0, 1, 5}, false},
		{"claude-elsewhere", "http://gateway.internal:4000/v1", "claude-3-7-sonnet", false, []int{0, 1, 5}, false},
		// Automatic prefix caching: a key for OpenAI, nothing elsewhere.
		{"openai", "https://api.openai.com/v1", "gpt-4.1", true, nil, true},
		{"deepseek", "https://api.deepseek.com", "deepseek-chat", true, nil, false},
		{"vllm", "http://localhost:8000/v1", "Qwen/Qwen3-8B", true, nil, false},
		{"openrouter-gpt", "https://openrouter.ai/api/v1", "openai/gpt-4.1", true, nil, false},
		{"dashscope-deepseek", "https://dashscope.aliyuncs.com/compatible-mode/v1", "deepseek-v3", true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Chat("ok"))
			c := providerClient(t, srv, tc.baseURL, tc.model)
			r := cachedRequest(tc.marked)
			_, err := c.Chat(ctxT(t), r)
			require.NoError(t, err)
			body := srv.Last(t).Body
			got := inspectCache(t, body)
			assert.Equal(t, tc.wantMarked, got.marked)
			assert.LessOrEqual(t, got.markers, MaxCacheBreakpoints)
			assert.Equal(t, tc.wantKey, got.hasKey)
			if tc.wantKey {
				assert.Regexp(t, `^sage-[0-9a-f]{32}$`, got.key)
				assert.NotContains(t, string(body), "session-1", "the session id is hashed")
			}
			for _, i := range tc.wantMarked {
				assert.NotContains(t, got.stringed, i, "marked message %d is in content-part form", i)
			}
			if len(tc.wantMarked) == 0 {
				assert.NotContains(t, string(body), "cache_control")
			}
			assert.Equal(t, conversation(), r.Messages, "the caller's messages are not modified")
			checkGolden(t, tc.name, body)
		})
	}
}

func TestPromptCacheModes(t *testing.T) {
	openaiURL, claude := "https://api.openai.com/v1", "claude-sonnet-4-5"
	for _, tc := range []struct {
		name, baseURL, model string
		mode                 PromptCacheMode
		caps                 Capabilities
		env                  string
		markers              bool
		key                  bool
	}{
		{"off-claude", openaiURL, claude, PromptCacheOff, Capabilities{}, "", false, false},
		{"key-forced-on-claude", "https://x.example/v1", claude, PromptCacheKey, Capabilities{}, "", false, true},
		{"breakpoints-forced-unknown", "https://x.example/v1", "llama", PromptCacheBreakpoints, Capabilities{}, "", true, false},
		{"breakpoints-forced-but-unsupported", "https://x.example/v1", "llama", PromptCacheBreakpoints,
			Capabilities{CacheControl: Unsupported}, "", false, false},
		{"auto-unknown-sends-nothing", "https://x.example/v1", "llama", PromptCacheAuto, Capabilities{}, "", false, false},
		{"auto-config-says-supported", "https://x.example/v1", "llama", PromptCacheAuto,
			Capabilities{CacheControl: Supported}, "", true, false},
		{"auto-config-overrides-table", openaiURL, "gpt-4.1", PromptCacheAuto,
			Capabilities{PromptCacheKey: Unsupported}, "", false, false},
		{"env-off", openaiURL, claude, "", Capabilities{}, "off", false, false},
		{"env-key", "https://x.example/v1", "llama", "", Capabilities{}, " KEY ", false, true},
		{"field-beats-env", "https://x.example/v1", "llama", PromptCacheBreakpoints, Capabilities{}, "off", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPromptCache, tc.env)
			srv := llmtest.New(t, llmtest.Chat("ok"))
			c := providerClient(t, srv, tc.baseURL, tc.model, func(cfg *Config) {
				cfg.PromptCache = tc.mode
				cfg.Standard.Capabilities = tc.caps
			})
			_, err := c.Chat(ctxT(t), cachedRequest(true))
			require.NoError(t, err)
			got := inspectCache(t, srv.Last(t).Body)
			assert.Equal(t, tc.markers, got.markers > 0)
			assert.Equal(t, tc.key, got.hasKey)
		})
	}
}

func TestPromptCacheModeConfig(t *testing.T) {
	t.Setenv(EnvPromptCache, "sometimes")
	_, err := New(Config{Standard: ModelConfig{BaseURL: "http://x/v1", Model: "m"}})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, EnvPromptCache, ce.Field)
	_, err = New(Config{Standard: ModelConfig{BaseURL: "http://x/v1", Model: "m"}, PromptCache: "always"})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "PromptCache", ce.Field)
	for in, want := range map[string]PromptCacheMode{"": PromptCacheAuto, "Auto": PromptCacheAuto,
		"breakpoints": PromptCacheBreakpoints, "key": PromptCacheKey, "off": PromptCacheOff} {
		got, err := ParsePromptCacheMode(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
}

func TestCacheDefaultsTable(t *testing.T) {
	for _, tc := range []struct {
		baseURL, model string
		want           Capabilities
	}{
		{"https://openrouter.ai/api/v1", "anthropic/claude-opus-4", Capabilities{CacheControl: Supported}},
		{"https://openrouter.ai/api/v1", "google/gemini-2.5-flash", Capabilities{CacheControl: Supported}},
		{"https://openrouter.ai/api/v1", "google/gemma-3-27b-it", Capabilities{}},
		{"https://openrouter.ai/api/v1", "deepseek/deepseek-chat", Capabilities{}},
		{"https://api.anthropic.com/v1", "claude-haiku-4-5", Capabilities{CacheControl: Supported}},
		{"https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen3-max", Capabilities{CacheControl: Supported}},
		{"https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "Qwen-Plus", Capabilities{CacheControl: Supported}},
		{"https://dashscope.aliyuncs.com/compatible-mode/v1", "kimi-k2", Capabilities{}},
		{"https://oss.aliyuncs.com/v1", "qwen-max", Capabilities{}},
		{"http://localhost:11434/v1", "qwen2.5", Capabilities{}},
		{"https://bedrock-gw.example.com/v1", "us.anthropic.claude-3-5-sonnet", Capabilities{CacheControl: Supported}},
		{"https://api.openai.com/v1", "gpt-4o-mini", Capabilities{PromptCacheKey: Supported}},
		{"https://api.openai.com.evil.example/v1", "gpt-4o-mini", Capabilities{}},
		{"https://api.deepseek.com", "deepseek-chat", Capabilities{}},
		{"::not a url", "m", Capabilities{}},
	} {
		assert.Equal(t, tc.want, cacheDefaults(tc.baseURL, tc.model), "%s %s", tc.baseURL, tc.model)
	}
}

func msgs(spec string) []openai.ChatCompletionMessage {
	// spec: one letter per message, s/u/a/t (system, user, assistant, tool),
	// upper case for a long one, "-" for an assistant without content.
	roles := map[byte]string{'s': "system", 'u': "user", 'a': "assistant", 't': "tool", '-': "assistant"}
	var out []openai.ChatCompletionMessage
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		lower := c | 0x20
		if c == '-' {
			lower = '-'
		}
		m := openai.ChatCompletionMessage{Role: roles[lower], Content: "short"}
		switch {
		case c == '-':
			m.Content = ""
		case c != lower && lower == 's':
			m.Content = strings.Repeat("s", MinCachedSystemChars)
		case c != lower:
			m.Content = strings.Repeat("x", MinCachedUserChars)
		}
		out = append(out, m)
	}
	return out
}

func TestPlaceBreakpoints(t *testing.T) {
	S, V, Sm := Stable, Volatile, SemiStable
	for _, tc := range []struct {
		name      string
		spec      string
		marks     []Stability
		tools     Stability
		want      []int
		toolChars int
	}{
		{"unmarked: longest system, long user, tail", "SUaua", nil, 0, []int{0, 1, 4}, 0},
		{"unmarked: short system and user skipped", "suaUa", nil, 0, []int{3, 4}, 0},
		{"unmarked: short conversation, nothing", "sua", nil, 0, nil, 0},
		{"tail skips tool and contentless messages", "SU-tt", nil, 0, []int{0, 1}, 0},
		{"tail is never a tool message", "sU-T", nil, 0, []int{1}, 0},
		{"marked: stable system end and tail", "SsUaua", []Stability{S, S}, S, []int{1, 5}, 0},
		{"marked: a short stable run is skipped", "suUa", []Stability{S}, S, []int{3}, 0},
		{"marked: each stable segment, semi-stable after", "SSSUAU", []Stability{S, Sm, S, S}, S, []int{0, 1, 3, 5}, 0},
		{"marked: the limit keeps the tail, then stable before semi-stable", "SSSSSU", []Stability{S, Sm, S, Sm, S}, S, []int{0, 2, 4, 5}, 0},
		{"marked: a volatile tail gives way", "SUaU", []Stability{S, 0, 0, V}, S, []int{0, 2}, 0},
		{"marked: volatile tools, nothing", "SUaU", []Stability{S}, V, nil, 0},
		{"marked: unmarked long user is not a segment", "SUUUa", []Stability{S}, S, []int{0, 4}, 0},
		{"unmarked: short system after long tools", "sua", nil, 0, []int{0, 2}, 5000},
		{"marked: short stable system after long tools", "sua", []Stability{S}, S, []int{0, 2}, 5000},
		{"control: short system after short tools", "sua", nil, 0, nil, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := placeBreakpoints(msgs(tc.spec), tc.marks, tc.tools, tc.toolChars)
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("a stable run is measured whole", func(t *testing.T) {
		half := strings.Repeat("s", MinCachedSystemChars/2)
		m := []openai.ChatCompletionMessage{{Role: "system", Content: half}, {Role: "system", Content: half}, {Role: "user", Content: "hi"}}
		assert.Equal(t, []int{1}, placeBreakpoints(m, []Stability{S, S}, S, 0), "the run's end, not each message")
		assert.Nil(t, placeBreakpoints(m[1:], []Stability{S}, S, 0), "half a run is too short")
	})
}

func TestCacheMarkerConversion(t *testing.T) {
	srv := llmtest.New(t, llmtest.Chat("ok"))
	c := providerClient(t, srv, "https://api.anthropic.com/v1", "claude-sonnet-4-5")
	r := Request{Stability: []Stability{Stable, SemiStable}}
	r.Messages = []openai.ChatCompletionMessage{
		{Role: "system", Content: longSystem},
		{Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: longUser},
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,AAAA"}},
		}},
	}
	_, err := c.Chat(ctxT(t), r)
	require.NoError(t, err)
	var b struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(srv.Last(t).Body, &b))
	require.Len(t, b.Messages, 2)
	// A string became one text part carrying the marker.
	assert.Equal(t, []map[string]any{{"type": "text", "text": longSystem, "cache_control": map[string]any{"type": "ephemeral"}}},
		b.Messages[0].Content)
	// Parts stay parts; the marker goes on the last one only.
	require.Len(t, b.Messages[1].Content, 2)
	assert.NotContains(t, b.Messages[1].Content[0], "cache_control")
	assert.Equal(t, map[string]any{"type": "ephemeral"}, b.Messages[1].Content[1]["cache_control"])
}

func TestPromptCacheRejectedThenRetried(t *testing.T) {
	for _, tc := range []struct {
		name, baseURL, model string
		reject               llmtest.Reply
		field                string
		caps                 func(Capabilities) Support
	}{
		{"cache_control in a path", "https://openrouter.ai/api/v1", "anthropic/claude-sonnet-4",
			llmtest.Reply{Status: 400, Body: `{"object":"error","message":"[{'type': 'extra_forbidden', 'loc': ('body', 'messages', 0, 'content', 0, 'cache_control'), 'msg': 'Extra inputs are not permitted'}]","type":"BadRequestError","param":null,"code":400}`},
			"cache_control", func(c Capabilities) Support { return c.CacheControl }},
		{"cache_control as a bad request", "https://gw.example/v1", "claude-sonnet-4-5",
			llmtest.Error(400, "invalid_request_error", "", "", "messages.0.content.0.cache_control: unexpected field"),
			"cache_control", func(c Capabilities) Support { return c.CacheControl }},
		{"prompt_cache_key", "https://api.openai.com/v1", "gpt-4.1",
			llmtest.Error(400, "invalid_request_error", "", "", "Unrecognized request argument supplied: prompt_cache_key"),
			"prompt_cache_key", func(c Capabilities) Support { return c.PromptCacheKey }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, tc.reject, llmtest.Chat("ok"), llmtest.Chat("again"))
			c := providerClient(t, srv, tc.baseURL, tc.model)
			resp, err := c.Chat(ctxT(t), cachedRequest(true))
			require.NoError(t, err)
			assert.Equal(t, "ok", resp.Content())
			reqs := srv.Requests()
			require.Len(t, reqs, 2, "one retry")
			assert.Contains(t, string(reqs[0].Body), tc.field)
			assert.NotContains(t, string(reqs[1].Body), tc.field)
			assert.Equal(t, Unsupported, tc.caps(c.Capabilities(Standard)), "remembered for the model")
			_, err = c.Chat(ctxT(t), cachedRequest(true))
			require.NoError(t, err)
			assert.NotContains(t, string(srv.Last(t).Body), tc.field, "later calls send it no more")
		})
	}
	t.Run("the caller's own key", func(t *testing.T) {
		rej := llmtest.Error(400, "invalid_request_error", "", "", "Unrecognized request argument supplied: prompt_cache_key")
		srv := llmtest.New(t, llmtest.Chat("ok"), rej, llmtest.Chat("ok"))
		c := providerClient(t, srv, "https://api.openai.com/v1", "gpt-4.1")
		r := cachedRequest(true)
		r.ExtraBody = map[string]any{"prompt_cache_key": "mine"}
		_, err := c.Chat(ctxT(t), r)
		require.NoError(t, err)
		assert.Equal(t, "mine", inspectCache(t, srv.Last(t).Body).key, "ExtraBody wins")
		_, err = c.Chat(ctxT(t), r)
		require.NoError(t, err)
		reqs := srv.Requests()
		require.Len(t, reqs, 3)
		assert.False(t, inspectCache(t, reqs[2].Body).hasKey, "dropped after the rejection")
	})
	t.Run("retried once only", func(t *testing.T) {
		rej := llmtest.Error(400, "invalid_request_error", "", "", "cache_control: unexpected field")
		srv := llmtest.New(t, rej, rej)
		c := providerClient(t, srv, "https://api.anthropic.com/v1", "claude-sonnet-4-5")
		_, err := c.Chat(ctxT(t), cachedRequest(true))
		require.ErrorIs(t, err, ErrBadRequest)
		assert.Len(t, srv.Requests(), 2)
	})
	t.Run("a 400 about something else is not a cache rejection", func(t *testing.T) {
		srv := llmtest.New(t, llmtest.Error(400, "invalid_request_error", "", "", "messages: too many"))
		c := providerClient(t, srv, "https://api.anthropic.com/v1", "claude-sonnet-4-5")
		_, err := c.Chat(ctxT(t), cachedRequest(true))
		require.Error(t, err)
		assert.Len(t, srv.Requests(), 1)
		assert.Equal(t, Supported, c.Capabilities(Standard).CacheControl)
	})
	t.Run("streamed", func(t *testing.T) {
		srv := llmtest.New(t, llmtest.Error(400, "invalid_request_error", "", "", "cache_control is not supported"), llmtest.Text("ok"))
		c := providerClient(t, srv, "https://api.anthropic.com/v1", "claude-sonnet-4-5")
		s, err := c.ChatStream(ctxT(t), cachedRequest(true))
		require.NoError(t, err)
		resp, err := s.Collect()
		require.NoError(t, err)
		assert.Equal(t, "ok", resp.Content())
		reqs := srv.Requests()
		require.Len(t, reqs, 2)
		assert.Contains(t, string(reqs[0].Body), "cache_control")
		assert.NotContains(t, string(reqs[1].Body), "cache_control")
	})
}

func TestCachedUsageDialects(t *testing.T) {
	for _, tc := range []struct {
		name, usage string
		want        Usage
	}{
		{"openai", `{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`,
			Usage{Input: 2006, Output: 300, Total: 2306, Cached: 1920}},
		{"deepseek", `{"prompt_tokens":339,"completion_tokens":83,"total_tokens":422,"prompt_cache_hit_tokens":320,"prompt_cache_miss_tokens":19}`,
			Usage{Input: 339, Output: 83, Total: 422, Cached: 320}},
		{"deepseek with details", `{"prompt_tokens":339,"completion_tokens":83,"total_tokens":422,"prompt_tokens_details":{"cached_tokens":320},"completion_tokens_details":{"reasoning_tokens":39},"prompt_cache_hit_tokens":320,"prompt_cache_miss_tokens":19}`,
			Usage{Input: 339, Output: 83, Total: 422, Cached: 320, Reasoning: 39}},
		{"anthropic-compatible", `{"prompt_tokens":3100,"completion_tokens":50,"total_tokens":3150,"cache_read_input_tokens":2048,"cache_creation_input_tokens":1000}`,
			Usage{Input: 3100, Output: 50, Total: 3150, Cached: 2048, CacheCreation: 1000}},
		{"anthropic names", `{"input_tokens":52,"output_tokens":50,"cache_read_input_tokens":2048,"cache_creation_input_tokens":1000}`,
			Usage{Input: 3100, Output: 50, Total: 3150, Cached: 2048, CacheCreation: 1000}},
		{"dashscope", `{"prompt_tokens":3019,"completion_tokens":104,"total_tokens":3123,"prompt_tokens_details":{"cached_tokens":0,"cache_creation_input_tokens":1708,"cache_type":"ephemeral"}}`,
			Usage{Input: 3019, Output: 104, Total: 3123, CacheCreation: 1708}},
		{"dashscope hit", `{"prompt_tokens":3019,"completion_tokens":104,"total_tokens":3123,"prompt_tokens_details":{"cached_tokens":1708,"cache_type":"ephemeral"}}`,
			Usage{Input: 3019, Output: 104, Total: 3123, Cached: 1708}},
		{"openrouter", `{"prompt_tokens":4000,"completion_tokens":10,"total_tokens":4010,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":3900}}`,
			Usage{Input: 4000, Output: 10, Total: 4010, CacheCreation: 3900}},
		{"no cache", `{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}`, Usage{Input: 5, Output: 1, Total: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":` + tc.usage + `}`
			srv := llmtest.New(t, llmtest.Reply{Body: body}, llmtest.Reply{Events: append(llmtest.TextEvents("ok"),
				`{"id":"x","object":"chat.completion.chunk","model":"m","choices":[],"usage":`+tc.usage+`}`)})
			c, _ := newClient(t, srv)
			resp, err := c.Chat(ctxT(t), req("hi"))
			require.NoError(t, err)
			assert.Equal(t, tc.want, resp.Usage, "chat")
			s, err := c.ChatStream(ctxT(t), req("hi"))
			require.NoError(t, err)
			resp, err = s.Collect()
			require.NoError(t, err)
			assert.Equal(t, tc.want, resp.Usage, "stream")
		})
	}
}

func TestUsageCachedShare(t *testing.T) {
	assert.InDelta(t, 0.5, Usage{Input: 10, Cached: 5}.CachedShare(), 1e-9)
	assert.Zero(t, Usage{}.CachedShare())
	assert.Equal(t, 1.0, Usage{Input: 1, Cached: 5}.CachedShare(), "bounded")
	assert.Equal(t, Usage{Input: 3, Output: 5, Cached: 7, CacheCreation: 9, Reasoning: 11, Total: 13},
		Usage{Input: 1, Output: 2, Cached: 3, CacheCreation: 4, Reasoning: 5, Total: 6}.
			Add(Usage{Input: 2, Output: 3, Cached: 4, CacheCreation: 5, Reasoning: 6, Total: 7}))
}

// FuzzPlaceBreakpoints checks the invariants whatever the conversation and
// marks: at most the limit, ascending, never on a tool message or one
// without content, never on a Volatile message.
func FuzzPlaceBreakpoints(f *testing.F) {
	f.Add("SUaua", []byte{1, 0, 0, 3}, byte(1))
	f.Add("SSSSSSU-tTa", []byte{1, 2, 1, 2, 1, 2}, byte(0))
	f.Fuzz(func(t *testing.T, spec string, marks []byte, tools byte) {
		var clean []byte
		for i := 0; i < len(spec) && len(clean) < 64; i++ {
			if strings.IndexByte("sSuUaAtT-", spec[i]) >= 0 {
				clean = append(clean, spec[i])
			}
		}
		ms := make([]Stability, 0, len(marks))
		for _, b := range marks {
			ms = append(ms, Stability(b%4))
		}
		m := msgs(string(clean))
		got := placeBreakpoints(m, ms, Stability(tools%4), 0)
		if len(got) > MaxCacheBreakpoints {
			t.Fatalf("%d breakpoints", len(got))
		}
		for j, i := range got {
			if j > 0 && got[j-1] >= i {
				t.Fatalf("not ascending: %v", got)
			}
			if m[i].Role == "tool" || m[i].Content == "" {
				t.Fatalf("breakpoint on message %d (%s %q)", i, m[i].Role, m[i].Content)
			}
			if i < len(ms) && ms[i] == Volatile {
				t.Fatalf("breakpoint on volatile message %d", i)
			}
		}
	})
}

func BenchmarkCacheRewrite(b *testing.B) {
	r := cachedRequest(true)
	for i := 0; i < 15; i++ { // a 36-message conversation
		r.Messages = append(r.Messages, conversation()[1:]...)
	}
	for _, mode := range []PromptCacheMode{PromptCacheOff, PromptCacheKey, PromptCacheBreakpoints} {
		b.Run(string(mode), func(b *testing.B) {
			t := target{model: "claude-sonnet-4-5", baseURL: "https://api.anthropic.com/v1", cacheMode: mode}
			p := sanitize(r, t)
			body, err := json.Marshal(p.req)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				p := sanitize(r, t)
				if !p.patch.empty() {
					if _, err := p.patch.apply(body); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(len(p.patch.cacheMarks)), "breakpoints")
		})
	}
}

func ExampleParsePromptCacheMode() {
	m, err := ParsePromptCacheMode("breakpoints")
	fmt.Println(m, err)
	// Output: breakpoints <nil>
}

// TestToolsCountInTheCachedPrefix: a short system prompt after several KB
// of tool definitions (the built-in tools) heads a long cached prefix, as
// the providers cache it (tools, then system, then messages): it gets a
// breakpoint (the old rule measured the system prompt alone and placed
// none). Control: without the tools, no breakpoint.
func TestToolsCountInTheCachedPrefix(t *testing.T) {
	tools := make([]openai.Tool, 6)
	for i := range tools {
		tools[i] = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: strings.Repeat("Does one careful thing in the sandbox workspace. ", 18),
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"A path relative to the workspace."}},"required":["path"]}`),
		}}
	}
	require.Greater(t, toolsChars(tools), 4000, "several KB of tools")
	for _, withTools := range []bool{true, false} {
		srv := llmtest.New(t, llmtest.Chat("ok"))
		c := providerClient(t, srv, "https://api.anthropic.com/v1", "claude-sonnet-4-5")
		r := Request{}
		r.Messages = []openai.ChatCompletionMessage{
			{Role: "system", Content: "You are a careful coding agent. Use the tools."},
			{Role: "user", Content: "List the files."},
		}
		if withTools {
			r.Tools = tools
		}
		_, err := c.Chat(ctxT(t), r)
		require.NoError(t, err)
		got := inspectCache(t, srv.Last(t).Body)
		if withTools {
			assert.Equal(t, []int{0, 1}, got.marked, "the system prompt and the tail")
		} else {
			assert.Empty(t, got.marked, "control: a short prompt alone is not worth a breakpoint")
		}
	}
}
