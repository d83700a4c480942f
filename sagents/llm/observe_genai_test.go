package llm_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
)

// TestObserverSeesToolCallsAndParams: the observer receives the model's
// tool calls as structured calls (not flattened into the content), the
// finish reason of each output message, the request parameters that were
// set, and a low-cardinality error type.
func TestObserverSeesToolCallsAndParams(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Reply{Events: []string{
			llmtest.Chunk(0, `{"role":"assistant","content":"Let me look."}`, ""),
			llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "call_1", "shell", `{"cmd":"ls"}`)), ""),
			llmtest.Chunk(0, `{}`, "tool_calls"),
		}},
		llmtest.Error(429, "rate_limit_error", "", "", "slow down"),
	)
	rec := &observabilitytest.Recorder{}
	c, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"},
		Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}}), Retry: llm.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	temp, seed := float32(0.7), 7
	req := llm.Request{Temperature: &temp}
	req.MaxCompletionTokens = 256
	req.Stop = []string{"END"}
	req.Seed = &seed
	req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	req.Messages = []openai.ChatCompletionMessage{
		{Role: "user", Content: "list"},
		{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "call_0", Type: "function",
			Function: openai.FunctionCall{Name: "shell", Arguments: `{"cmd":"pwd"}`}}}},
		{Role: "tool", ToolCallID: "call_0", Content: "/work"},
	}
	s, err := c.ChatStream(context.Background(), req)
	require.NoError(t, err)
	_, err = s.Collect()
	require.NoError(t, err)
	_, err = c.Chat(context.Background(), req)
	require.Error(t, err)

	require.Len(t, starts(rec), 2)
	in := starts(rec)[0].Messages
	require.Len(t, in, 3)
	require.Empty(t, in[1].Content, "tool calls are not flattened into the content")
	require.Equal(t, []observability.ToolCallRef{{ID: "call_0", Name: "shell", Arguments: `{"cmd":"pwd"}`}}, in[1].ToolCalls)
	require.Equal(t, "call_0", in[2].ToolCallID)
	p := starts(rec)[0].Params
	require.NotNil(t, p.Temperature)
	require.Equal(t, 0.7, *p.Temperature)
	require.Nil(t, p.TopP)
	require.Equal(t, 256, p.MaxTokens)
	require.Equal(t, []string{"END"}, p.Stop)
	require.Equal(t, int64(7), *p.Seed)
	require.Equal(t, "json", p.OutputType)

	require.Len(t, ends(rec), 1)
	out := ends(rec)[0].Messages
	require.Len(t, out, 1)
	require.Equal(t, "Let me look.", out[0].Content)
	require.Equal(t, "tool_calls", out[0].FinishReason)
	require.Equal(t, []observability.ToolCallRef{{ID: "call_1", Name: "shell", Arguments: `{"cmd":"ls"}`}}, out[0].ToolCalls)

	require.Len(t, rec.Errs("LLMError"), 1)
	require.Equal(t, "rate_limited", observability.ErrorType(rec.Errs("LLMError")[0]))
}

// TestObserverSeesEmbeddings: each embeddings request is an llm run with
// the embeddings operation, its model, dimensions and input tokens.
func TestObserverSeesEmbeddings(t *testing.T) {
	srv := llmtest.New(t)
	n := 0
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply {
		if n++; n == 2 {
			return llmtest.Error(429, "rate_limit_error", "", "", "slow down")
		}
		return llmtest.EchoEmbeddings(r)
	})
	rec := &observabilitytest.Recorder{}
	c, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"},
		Embedding:          llm.ModelConfig{BaseURL: srv.URL, Model: "embed-model"},
		EmbeddingBatchSize: 2, EmbeddingDimensions: 2,
		Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}}), Retry: llm.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	_, err = c.Embed(context.Background(), []string{"a", "b", "c"})
	require.Error(t, err)

	require.Len(t, starts(rec), 2)
	for _, r := range starts(rec) {
		require.Equal(t, observability.OpEmbeddings, r.Operation)
		require.Equal(t, "embed-model", r.Model)
		require.Equal(t, 2, r.Params.Dimensions)
	}
	require.Len(t, ends(rec), 1)
	require.Equal(t, int64(1), ends(rec)[0].Usage.InputTokens)
	require.Len(t, rec.Errs("LLMError"), 1)
	require.Equal(t, "rate_limited", observability.ErrorType(rec.Errs("LLMError")[0]))
}

// TestEmbeddingRetryIsOneOperation: an embeddings batch that succeeds on
// its second attempt is one embeddings operation for the observer, as a
// retried chat call is (the old code reported a failed operation per
// attempt). Control: a batch whose attempts all fail is one failed
// operation.
func TestEmbeddingRetryIsOneOperation(t *testing.T) {
	srv := llmtest.New(t)
	n := 0
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply {
		if n++; n == 1 || n >= 3 {
			return llmtest.Error(503, "server_error", "", "", "overloaded")
		}
		return llmtest.EchoEmbeddings(r)
	})
	rec := &observabilitytest.Recorder{}
	c, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: srv.URL, Model: "m"},
		Embedding: llm.ModelConfig{BaseURL: srv.URL, Model: "embed-model"}, EmbeddingBatchSize: 8,
		Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}}),
		Retry:    llm.RetryPolicy{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }}})
	require.NoError(t, err)
	_, err = c.Embed(context.Background(), []string{"a", "b"})
	require.NoError(t, err)
	require.Len(t, starts(rec), 1, "one operation for the batch, retries included")
	require.Len(t, ends(rec), 1)
	require.Empty(t, rec.Errs("LLMError"))

	_, err = c.Embed(context.Background(), []string{"c"}) // attempts 3 and 4 fail
	require.Error(t, err)
	require.Len(t, starts(rec), 2)
	require.Len(t, rec.Errs("LLMError"), 1, "control: one failed operation")
}

// hostTransport sends every request to the test server, whatever host
// the client was configured with.
type hostTransport struct{ target *url.URL }

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = h.target.Scheme, h.target.Host
	return http.DefaultTransport.RoundTrip(r)
}

// TestObserverSeesProviderAndOpenAIFields: gen_ai.provider.name is the
// well-known value of the base URL's host (groq for api.groq.com, not
// openai for every compatible URL), ModelConfig.Provider overrides it, and
// the response's system_fingerprint and service_tier, the requested
// service tier and the API type reach the observer; the chunk intervals of
// a stream too (one per chunk after the first).
func TestObserverSeesProviderAndOpenAIFields(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Events: []string{
			`{"id":"c1","model":"m-1","system_fingerprint":"fp_1a2b","service_tier":"default","choices":[{"index":0,"delta":{"role":"assistant","content":"He"}}]}`,
			`{"id":"c1","model":"m-1","system_fingerprint":"fp_1a2b","service_tier":"default","choices":[{"index":0,"delta":{"content":"llo"},"finish_reason":"stop"}]}`,
			`{"id":"c1","model":"m-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
		}, EventDelay: 20 * time.Millisecond}
	})
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	hc := &http.Client{Transport: hostTransport{target}}
	for _, tc := range []struct{ baseURL, provider, want string }{
		{"https://api.groq.com/openai/v1", "", "groq"},
		{"https://api.deepseek.com/v1", "", "deepseek"},
		{"https://my-proxy.example/v1", "", "openai"},
		{"https://my-proxy.example/v1", "mistral_ai", "mistral_ai"},
	} {
		rec := &observabilitytest.Recorder{}
		c, err := llm.New(llm.Config{Standard: llm.ModelConfig{BaseURL: tc.baseURL, Model: "m", Provider: tc.provider},
			HTTPClient: hc, Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}}),
			Retry: llm.RetryPolicy{MaxAttempts: 1}})
		require.NoError(t, err)
		r := llm.Request{}
		r.ServiceTier = openai.ServiceTierFlex
		r.Messages = []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}
		s, err := c.ChatStream(context.Background(), r)
		require.NoError(t, err)
		_, err = s.Collect()
		require.NoError(t, err)
		require.Len(t, starts(rec), 1)
		st := starts(rec)[0]
		require.Equal(t, tc.want, st.Provider, tc.baseURL)
		require.Equal(t, "chat_completions", st.APIType)
		require.Equal(t, "flex", st.Params.ServiceTier)
		require.Len(t, ends(rec), 1)
		e := ends(rec)[0]
		require.Equal(t, "fp_1a2b", e.SystemFingerprint)
		require.Equal(t, "default", e.ServiceTier)
		require.Len(t, e.ChunkIntervals, 2, "three chunks: two intervals")
		for _, d := range e.ChunkIntervals {
			require.GreaterOrEqual(t, d, 15*time.Millisecond, "the server waits 20ms before each chunk")
		}
	}
}

func TestProviderName(t *testing.T) {
	for url, want := range map[string]string{
		"https://api.openai.com/v1":                                     "openai",
		"https://myres.openai.azure.com/openai/deployments/gpt":         "azure.ai.openai",
		"https://api.deepseek.com":                                      "deepseek",
		"https://api.groq.com/openai/v1":                                "groq",
		"https://api.mistral.ai/v1":                                     "mistral_ai",
		"https://api.x.ai/v1":                                           "x_ai",
		"https://api.perplexity.ai":                                     "perplexity",
		"https://generativelanguage.googleapis.com/v1beta/openai/":      "gcp.gemini",
		"https://us-central1-aiplatform.googleapis.com/v1/projects/p/x": "gcp.vertex_ai",
		"https://api.moonshot.ai/v1":                                    "moonshot_ai",
		"http://localhost:8000/v1":                                      "openai",
		"https://notgroq.com.evil.example/v1":                           "openai",
		"::not a url":                                                   "openai",
	} {
		require.Equal(t, want, llm.ProviderName(url), url)
	}
}
