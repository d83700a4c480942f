package llm

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/sage-go/sage/sagents/observability"
)

// ErrStreamClosed ends the llm run of a [Stream] that was closed before its
// last chunk was read.
var ErrStreamClosed = errors.New("llm: stream closed before it ended")

// observeStart reports the start of a call to the client's Observer and
// returns the context that carries it (ctx itself without an Observer).
func (c *Client) observeStart(ctx context.Context, m *model, r Request, stream bool) context.Context {
	if c.obs == nil {
		return ctx
	}
	host, port := serverAddress(m.cfg.BaseURL)
	mt := observability.ModelStandard
	if r.ModelType == Fast {
		mt = observability.ModelFast
	}
	return c.obs.LLMStart(ctx, observability.LLMRequest{
		Provider:      m.provider(),
		Model:         m.cfg.Model,
		ModelType:     mt,
		ServerAddress: host,
		ServerPort:    port,
		Stream:        stream,
		APIType:       "chat_completions",
		Messages:      observedMessages(r.Messages),
		Params:        observedParams(r),
	})
}

// provider is the model's gen_ai.provider.name: the configured one, else
// its base URL's.
func (m *model) provider() string {
	if m.cfg.Provider != "" {
		return m.cfg.Provider
	}
	return providerName(m.cfg.BaseURL)
}

// providerName is the GenAI conventions' gen_ai.provider.name of an
// OpenAI-compatible base URL: the well-known value of its host (deepseek,
// groq, mistral_ai, x_ai, azure.ai.openai, ...), else "openai" (the API
// the client speaks).
func providerName(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "openai"
	}
	host := strings.ToLower(u.Hostname())
	on := func(domain string) bool { return host == domain || strings.HasSuffix(host, "."+domain) }
	switch {
	case on("openai.azure.com"), on("cognitiveservices.azure.com"):
		return "azure.ai.openai"
	case on("models.inference.ai.azure.com"), on("services.ai.azure.com"), on("models.ai.azure.com"):
		return "azure.ai.inference"
	case on("deepseek.com"):
		return "deepseek"
	case on("groq.com"):
		return "groq"
	case on("mistral.ai"):
		return "mistral_ai"
	case on("x.ai"):
		return "x_ai"
	case on("perplexity.ai"):
		return "perplexity"
	case on("anthropic.com"):
		return "anthropic"
	case on("cohere.com"), on("cohere.ai"):
		return "cohere"
	case on("moonshot.ai"), on("moonshot.cn"):
		return "moonshot_ai"
	case host == "generativelanguage.googleapis.com":
		return "gcp.gemini"
	case host == "aiplatform.googleapis.com" || strings.HasSuffix(host, "-aiplatform.googleapis.com"):
		return "gcp.vertex_ai"
	case strings.HasPrefix(host, "bedrock-runtime.") && on("amazonaws.com"):
		return "aws.bedrock"
	case on("ml.cloud.ibm.com"):
		return "ibm.watsonx.ai"
	}
	return "openai"
}

// observedParams are the request parameters that were set.
func observedParams(r Request) observability.RequestParams {
	f64 := func(f *float32) *float64 {
		if f == nil {
			return nil
		}
		v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(*f), 'g', -1, 32), 64)
		return &v
	}
	nz := func(f float32) *float32 {
		if f == 0 {
			return nil
		}
		return &f
	}
	p := observability.RequestParams{
		Temperature: f64(r.Temperature), TopP: f64(r.TopP),
		FrequencyPenalty: f64(nz(r.FrequencyPenalty)), PresencePenalty: f64(nz(r.PresencePenalty)),
		MaxTokens: max(r.MaxCompletionTokens, r.MaxTokens), Stop: r.Stop, ChoiceCount: r.N,
		ServiceTier: string(r.ServiceTier),
	}
	if r.Seed != nil {
		s := int64(*r.Seed)
		p.Seed = &s
	}
	if rf := r.ResponseFormat; rf != nil {
		p.OutputType = "text"
		if rf.Type != openai.ChatCompletionResponseFormatTypeText {
			p.OutputType = "json"
		}
	}
	return p
}

// observeEmbedStart reports the start of one embeddings request.
func (c *Client) observeEmbedStart(ctx context.Context, m *model) context.Context {
	if c.obs == nil {
		return ctx
	}
	host, port := serverAddress(m.cfg.BaseURL)
	return c.obs.LLMStart(ctx, observability.LLMRequest{Operation: observability.OpEmbeddings, Provider: m.provider(),
		Model: m.cfg.Model, ServerAddress: host, ServerPort: port, Params: observability.RequestParams{Dimensions: c.embedDims}})
}

// observeEmbedEnd reports how an embeddings request ended.
func (c *Client) observeEmbedEnd(ctx context.Context, resp *openai.EmbeddingResponse, err error) {
	switch {
	case c.obs == nil:
	case err != nil:
		c.obs.LLMError(ctx, err)
	default:
		c.obs.LLMEnd(ctx, observability.LLMResponse{Model: string(resp.Model),
			Usage: observability.Usage{InputTokens: int64(resp.Usage.PromptTokens)}})
	}
}

// observeEnd reports how a call ended. It is a no-op without an Observer.
func (c *Client) observeEnd(ctx context.Context, resp *Response, err error) {
	report(c.obs, ctx, resp, nil, err)
}

// report ends the llm run of ctx with resp (and the stream's chunk
// intervals), or err.
func report(obs *observability.Manager, ctx context.Context, resp *Response, intervals []time.Duration, err error) {
	if obs == nil {
		return
	}
	if err != nil {
		obs.LLMError(ctx, err)
		return
	}
	out := observability.LLMResponse{
		ID:                resp.ID,
		Model:             resp.Model,
		SystemFingerprint: resp.SystemFingerprint,
		ServiceTier:       resp.ServiceTier,
		ChunkIntervals:    intervals,
		TimeToFirstChunk:  resp.TTFT,
		Usage: observability.Usage{
			InputTokens:              int64(resp.Usage.Input),
			OutputTokens:             int64(resp.Usage.Output),
			CacheReadInputTokens:     int64(resp.Usage.Cached),
			CacheCreationInputTokens: int64(resp.Usage.CacheCreation),
			ReasoningTokens:          int64(resp.Usage.Reasoning),
		},
	}
	for _, ch := range resp.Choices {
		out.FinishReasons = append(out.FinishReasons, string(ch.FinishReason))
		m := observedMessage(ch.Message)
		m.FinishReason = string(ch.FinishReason)
		out.Messages = append(out.Messages, m)
	}
	obs.LLMEnd(ctx, out)
}

// report ends the stream's llm run once; later calls do nothing.
func (s *Stream) report(resp *Response, err error) {
	obs := s.obs
	s.obs = nil
	report(obs, s.octx, resp, s.intervals, err)
}

func serverAddress(baseURL string) (string, int) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", 0
	}
	host, portStr, err := net.SplitHostPort(u.Host)
	if err != nil {
		host = u.Host
		switch u.Scheme {
		case "https":
			portStr = "443"
		case "http":
			portStr = "80"
		}
	}
	port, _ := strconv.Atoi(portStr)
	return host, port
}

func observedMessages(in []openai.ChatCompletionMessage) []observability.Message {
	out := make([]observability.Message, 0, len(in))
	for _, m := range in {
		out = append(out, observedMessage(m))
	}
	return out
}

func observedMessage(m openai.ChatCompletionMessage) observability.Message {
	content := m.Content
	if content == "" {
		for _, p := range m.MultiContent {
			content += p.Text
		}
	}
	out := observability.Message{Role: m.Role, Content: content, Name: m.Name, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, observability.ToolCallRef{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out
}
