package llm

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"

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
		Provider:      "openai",
		Model:         m.cfg.Model,
		ModelType:     mt,
		ServerAddress: host,
		ServerPort:    port,
		Stream:        stream,
		Messages:      observedMessages(r.Messages),
	})
}

// observeEnd reports how a call ended. It is a no-op without an Observer.
func (c *Client) observeEnd(ctx context.Context, resp *Response, err error) {
	report(c.obs, ctx, resp, err)
}

func report(obs *observability.Manager, ctx context.Context, resp *Response, err error) {
	if obs == nil {
		return
	}
	if err != nil {
		obs.LLMError(ctx, err)
		return
	}
	out := observability.LLMResponse{
		ID:               resp.ID,
		Model:            resp.Model,
		TimeToFirstChunk: resp.TTFT,
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
		out.Messages = append(out.Messages, observedMessage(ch.Message))
	}
	obs.LLMEnd(ctx, out)
}

// report ends the stream's llm run once; later calls do nothing.
func (s *Stream) report(resp *Response, err error) {
	obs := s.obs
	s.obs = nil
	report(obs, s.octx, resp, err)
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
	if content == "" && len(m.ToolCalls) > 0 {
		for i, tc := range m.ToolCalls {
			if i > 0 {
				content += "\n"
			}
			content += tc.Function.Name + "(" + tc.Function.Arguments + ")"
		}
	}
	return observability.Message{Role: m.Role, Content: content, Name: m.Name, ToolCallID: m.ToolCallID}
}
