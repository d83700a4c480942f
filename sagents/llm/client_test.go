package llm

import (
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewValidates(t *testing.T) {
	_, err := New(Config{})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Standard.Model", ce.Field)
}

// A base URL no request can go to is a bad setting at New, naming the
// field, not a connection error retried at the first call.
func TestNewRefusesABadBaseURL(t *testing.T) {
	for _, tc := range []struct{ field, url, want string }{
		{"Standard.BaseURL", "ht!tp://x", "not a URL"},
		{"Standard.BaseURL", "localhost:11434/v1", "want an http:// or https:// URL"},
		{"Standard.BaseURL", "http:///v1", "has no host"},
		{"Fast.BaseURL", "ftp://x/v1", "want an http:// or https:// URL"},
	} {
		cfg := Config{Standard: ModelConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, Fast: ModelConfig{Model: "f"}}
		if tc.field == "Fast.BaseURL" {
			cfg.Fast.BaseURL = tc.url
		} else {
			cfg.Standard.BaseURL = tc.url
		}
		_, err := New(cfg)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, tc.url)
		assert.Equal(t, tc.field, ce.Field)
		assert.Contains(t, ce.Reason, tc.want)
		assert.Contains(t, ce.Reason, "http://localhost:11434/v1", "names an example")
	}
	_, err := New(Config{Standard: ModelConfig{BaseURL: "https://api.example.com/v1", Model: "m"}})
	assert.NoError(t, err, "control: a good URL")
}

func TestChatNonStreaming(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Body: `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,` +
		`"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":1}}}`})
	c, _ := newClient(t, srv)
	resp, err := c.Chat(ctxT(t), req("x"))
	require.NoError(t, err)
	assert.Equal(t, Usage{Input: 9, Output: 4, Cached: 8, Reasoning: 1, Total: 13}, resp.Usage)
	require.Len(t, resp.Choices[0].ToolCalls, 1)
	assert.JSONEq(t, `{"a":1}`, string(resp.Choices[0].ToolCalls[0].Arguments))
	assert.Equal(t, openai.FinishReasonToolCalls, resp.Choices[0].FinishReason)
	assert.Equal(t, "Bearer sk-test", srv.Last(t).Header.Get("Authorization"))
	assert.Equal(t, "/v1/chat/completions", srv.Last(t).Path)
}

func TestAPIKeysRotateRoundRobinPerModel(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Chat("ok") })
	c, _ := newClient(t, srv, func(cfg *Config) {
		cfg.Standard.APIKey = "k1, k2,k3"
		cfg.Fast = ModelConfig{Model: "fast", APIKey: "f1,f2"}
	})
	var got []string
	for i := 0; i < 4; i++ {
		_, err := c.Chat(ctxT(t), req("x"))
		require.NoError(t, err)
		got = append(got, strings.TrimPrefix(srv.Last(t).Header.Get("Authorization"), "Bearer "))
		r := req("x")
		r.ModelType = Fast
		_, err = c.Chat(ctxT(t), r)
		require.NoError(t, err)
		got = append(got, strings.TrimPrefix(srv.Last(t).Header.Get("Authorization"), "Bearer "))
	}
	assert.Equal(t, []string{"k1", "f1", "k2", "f2", "k3", "f1", "k1", "f2"}, got)
}

func TestFastFallsBackToStandard(t *testing.T) {
	srv := llmtest.New(t, llmtest.Chat("ok"))
	c, _ := newClient(t, srv)
	r := req("x")
	r.ModelType = Fast
	_, err := c.Chat(ctxT(t), r)
	require.NoError(t, err)
	assert.Equal(t, "test-model", srv.Last(t).JSON(t)["model"])
	assert.Equal(t, "test-model", c.Model(Fast))
}

// rejectsReasoningEffort is a server that refuses reasoning_effort.
func rejectsReasoningEffort(r llmtest.Request) llmtest.Reply {
	if strings.Contains(string(r.Body), `"reasoning_effort"`) {
		return llmtest.Error(400, "invalid_request_error", "unsupported_parameter", "reasoning_effort",
			"Unsupported parameter: 'reasoning_effort' is not supported with this model.")
	}
	return llmtest.Chat("fine")
}

func TestUnsupportedParameterRetriedOnceWithoutIt(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(rejectsReasoningEffort)
	c, sl := newClient(t, srv)
	r := req("x")
	r.ReasoningEffort = "high"
	resp, err := c.Chat(ctxT(t), r)
	require.NoError(t, err)
	assert.Equal(t, "fine", resp.Content())
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Contains(t, reqs[0].JSON(t), "reasoning_effort")
	assert.NotContains(t, reqs[1].JSON(t), "reasoning_effort")
	assert.Empty(t, sl.got(), "no backoff for the adapted retry")
	assert.Equal(t, Unsupported, c.Capabilities(Standard).ReasoningEffort, "learned")

	_, err = c.Chat(ctxT(t), r)
	require.NoError(t, err)
	assert.Len(t, srv.Requests(), 3, "known unsupported: stripped up front")
}

func TestUnsupportedParameterRequiredIsNotRemoved(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(rejectsReasoningEffort)
	c, _ := newClient(t, srv)
	r := req("x")
	r.ReasoningEffort = "high"
	r.Required = []string{"reasoning_effort"}
	_, err := c.Chat(ctxT(t), r)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, KindUnsupportedParameter, e.Kind)
	assert.Equal(t, "reasoning_effort", e.Param)
	assert.Len(t, srv.Requests(), 1)
	assert.Equal(t, Unknown, c.Capabilities(Standard).ReasoningEffort)
}

func TestUnsupportedExtraParameterDroppedInStream(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Error(400, "invalid_request_error", "", "", "Unrecognized request argument supplied: top_k"),
		llmtest.Text("ok"))
	c, _ := newClient(t, srv)
	r := req("x")
	r.ExtraBody = map[string]any{"top_k": 5}
	resp, err := collect(t, c, r)
	require.NoError(t, err)
	assert.Equal(t, "ok", resp.Content())
	assert.NotContains(t, srv.Last(t).JSON(t), "top_k")
}

func TestUnsupportedMaxTokensBecomesMaxCompletionTokens(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Error(400, "invalid_request_error", "unsupported_parameter", "max_tokens",
			"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."),
		llmtest.Chat("ok"))
	c, _ := newClient(t, srv)
	r := req("x")
	r.MaxTokens = 50
	_, err := c.Chat(ctxT(t), r)
	require.NoError(t, err)
	body := srv.Last(t).JSON(t)
	assert.NotContains(t, body, "max_tokens")
	assert.EqualValues(t, 50, body["max_completion_tokens"])
}

// noImages is a server without image support.
func noImages(r llmtest.Request) llmtest.Reply {
	if strings.Contains(string(r.Body), `"image_url"`) {
		return llmtest.Error(400, "BadRequestError", "", "", "This model does not support image input")
	}
	return llmtest.Chat("text only")
}

func TestServerWithoutImagesDowngradesAfterOneRejection(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(noImages)
	c, _ := newClient(t, srv)
	resp, err := c.Chat(ctxT(t), imageRequest())
	require.NoError(t, err)
	assert.Equal(t, "text only", resp.Content())
	assert.Equal(t, Unsupported, c.Capabilities(Standard).Multimodal)
	msgs := srv.Last(t).JSON(t)["messages"].([]any)
	assert.Equal(t, "what is this?\n"+imageOmitted, msgs[0].(map[string]any)["content"])
}

func TestUnknownCapabilitiesNeverStrip(t *testing.T) {
	srv := llmtest.New(t, llmtest.Chat("ok"))
	c, _ := newClient(t, srv)
	r := imageRequest()
	r.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	_, err := c.Chat(ctxT(t), r)
	require.NoError(t, err)
	body := string(srv.Last(t).Body)
	assert.Contains(t, body, `"response_format":{"type":"json_object"}`)
	assert.Contains(t, body, `"image_url"`)
}
