package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Usage is token accounting for one call.
type Usage struct {
	Input  int `json:"input"`
	Output int `json:"output"`
	Cached int `json:"cached"` // input tokens served from the prompt cache
	// CacheCreation counts input tokens written to the prompt cache
	// (providers with explicit breakpoints bill them above plain input).
	CacheCreation int `json:"cache_creation"`
	Reasoning     int `json:"reasoning"` // output tokens spent reasoning
	Total         int `json:"total"`
}

// CachedShare is the share of input tokens served from the prompt cache, in
// [0, 1]; 0 without input.
func (u Usage) CachedShare() float64 {
	if u.Input <= 0 || u.Cached <= 0 {
		return 0
	}
	return min(1, float64(u.Cached)/float64(u.Input))
}

// Add returns the sum of u and o, field by field.
func (u Usage) Add(o Usage) Usage {
	return Usage{Input: u.Input + o.Input, Output: u.Output + o.Output, Cached: u.Cached + o.Cached,
		CacheCreation: u.CacheCreation + o.CacheCreation, Reasoning: u.Reasoning + o.Reasoning, Total: u.Total + o.Total}
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
	// Extra holds the call's fields other than id, type and function, raw
	// as the server sent them (Gemini's extra_content with its thought
	// signature). The client sends them back with the call on later turns.
	Extra map[string]json.RawMessage
}

// Choice is one assembled choice.
type Choice struct {
	Index int
	// Message is ready to append to the conversation: content, reasoning
	// content and tool calls (raw argument strings).
	Message      Message
	ToolCalls    []ToolCall
	FinishReason FinishReason
}

// Response is the result of Chat, or of a stream once it has ended.
type Response struct {
	ID      string
	Model   string
	Choices []Choice // ordered by choice index
	Usage   Usage
	// SystemFingerprint and ServiceTier are what the server said of the
	// backend that answered (OpenAI), when it said it.
	SystemFingerprint string
	ServiceTier       string
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
func (r *Response) FinishReasons() []FinishReason {
	out := make([]FinishReason, len(r.Choices))
	for i, c := range r.Choices {
		out[i] = c.FinishReason
	}
	return out
}

// wireResponse is a non-streaming chat.completion body.
type wireResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int       `json:"index"`
		Message      wireDelta `json:"message"`
		FinishReason string    `json:"finish_reason"`
	} `json:"choices"`
	Usage             *wireUsage      `json:"usage"`
	Error             json.RawMessage `json:"error"`
	SystemFingerprint string          `json:"system_fingerprint"`
	ServiceTier       string          `json:"service_tier"`
	Object            string          `json:"object"`
}

// decodeChatBody decodes a chat.completion body with the stream's wire
// types, so that a message means what a streamed delta means (reasoning in
// "reasoning", content parts, tool-call extra fields), and assembles it under
// the client's limits. A 200 body that carries only "error" is that error.
func decodeChatBody(body []byte, lim ResponseLimits) (*Response, error) {
	var w wireResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&w); err != nil {
		return nil, &Error{Kind: KindServer, Message: fmt.Sprintf("malformed response %.200q", body), Err: err}
	}
	if len(w.Error) > 0 && !isNull(w.Error) && len(w.Choices) == 0 {
		return nil, streamEventError(w.Error)
	}
	if w.Object == "response" && len(w.Choices) == 0 {
		return nil, responsesAPIError(`body (object "response")`)
	}
	c := Chunk{ID: w.ID, Model: w.Model, SystemFingerprint: w.SystemFingerprint, ServiceTier: w.ServiceTier}
	if w.Usage != nil {
		c.Usage = w.Usage.usage()
	}
	for _, ch := range w.Choices {
		d := ch.Message.normalise()
		for i := range d.ToolCalls {
			if d.ToolCalls[i].Index == nil { // position is the index in a complete message
				d.ToolCalls[i].Index = ptrTo(i)
			}
		}
		c.Choices = append(c.Choices, ChunkChoice{Index: ch.Index, Delta: d, FinishReason: ch.FinishReason})
	}
	asm := assembler{lim: lim}
	if err := asm.add(&c); err != nil {
		return nil, err
	}
	return asm.response(), nil
}

func ptrTo[T any](v T) *T { return &v }

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
