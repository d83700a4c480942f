package llm

import (
	"encoding/json"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Usage is token accounting for one call.
type Usage struct {
	Input     int `json:"input"`
	Output    int `json:"output"`
	Cached    int `json:"cached"`    // input tokens served from the prompt cache
	Reasoning int `json:"reasoning"` // output tokens spent reasoning
	Total     int `json:"total"`
}

// ToolCall is one assembled tool call. Arguments is valid JSON ("{}" when the
// server sent none) unless ArgumentsErr is set, in which case Raw holds the
// text received.
type ToolCall struct {
	Index        int // the server's tool index (synthesised when it sent none)
	ID           string
	Type         string
	Name         string
	Arguments    json.RawMessage
	Raw          string
	ArgumentsErr *ArgumentsError
}

// Choice is one assembled choice.
type Choice struct {
	Index int
	// Message is ready to append to the conversation: content, reasoning
	// content and tool calls (raw argument strings).
	Message      openai.ChatCompletionMessage
	ToolCalls    []ToolCall
	FinishReason openai.FinishReason
}

// Response is the result of Chat, or of a stream once it has ended.
type Response struct {
	ID      string
	Model   string
	Choices []Choice // ordered by choice index
	Usage   Usage
	// TTFT is the time from sending the successful attempt to its first
	// stream chunk; 0 for Chat.
	TTFT    time.Duration
	Latency time.Duration
}

// Content returns the first choice's text, or "".
func (r *Response) Content() string {
	if r == nil || len(r.Choices) == 0 {
		return ""
	}
	return r.Choices[0].Message.Content
}

// FinishReasons lists each choice's finish reason in choice order.
func (r *Response) FinishReasons() []openai.FinishReason {
	out := make([]openai.FinishReason, len(r.Choices))
	for i, c := range r.Choices {
		out[i] = c.FinishReason
	}
	return out
}

func usageFrom(u openai.Usage) Usage {
	out := Usage{Input: u.PromptTokens, Output: u.CompletionTokens, Total: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		out.Cached = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.Reasoning = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

func fromChatResponse(in openai.ChatCompletionResponse) *Response {
	r := &Response{ID: in.ID, Model: in.Model, Usage: usageFrom(in.Usage)}
	for _, ch := range in.Choices {
		c := Choice{Index: ch.Index, Message: ch.Message, FinishReason: ch.FinishReason}
		for i, tc := range ch.Message.ToolCalls {
			idx := i
			if tc.Index != nil {
				idx = *tc.Index
			}
			c.ToolCalls = append(c.ToolCalls, finishToolCall(idx, tc.ID, string(tc.Type), tc.Function.Name, tc.Function.Arguments))
		}
		r.Choices = append(r.Choices, c)
	}
	return r
}

// finishToolCall parses a call's arguments once the call is complete.
func finishToolCall(idx int, id, typ, name, raw string) ToolCall {
	tc := ToolCall{Index: idx, ID: id, Type: typ, Name: name, Raw: raw}
	if tc.Type == "" {
		tc.Type = string(openai.ToolTypeFunction)
	}
	switch {
	case isBlank(raw):
		tc.Arguments = json.RawMessage("{}")
	case json.Valid([]byte(raw)):
		tc.Arguments = json.RawMessage(raw)
	default:
		var v any
		err := json.Unmarshal([]byte(raw), &v)
		tc.ArgumentsErr = &ArgumentsError{Name: name, Raw: raw, Err: err}
	}
	return tc
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}
