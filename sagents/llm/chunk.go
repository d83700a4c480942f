package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Chunk is one decoded stream chunk, normalised from whichever dialect the
// server speaks (see wire.go). The JSON tags only shape how a Chunk is
// marshalled (in OpenAI's names); decoding goes through the wire types.
type Chunk struct {
	ID      string        `json:"id"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"` // set on the usage chunk, often with no choices
	// SystemFingerprint and ServiceTier are what the server said of the
	// backend that answered, when it said it.
	SystemFingerprint string `json:"system_fingerprint,omitempty"`
	ServiceTier       string `json:"service_tier,omitempty"`
}

// ChunkChoice is one choice's delta in a chunk.
type ChunkChoice struct {
	Index        int        `json:"index"`
	Delta        ChunkDelta `json:"delta"`
	FinishReason string     `json:"finish_reason"`
}

// ChunkDelta is the incremental content of a choice.
type ChunkDelta struct {
	Role string `json:"role,omitempty"`
	// Content is the visible text: "content" as a string, or the text parts
	// of "content" sent as an array of typed parts (Mistral).
	Content string `json:"content,omitempty"`
	// ReasoningContent is the delta's reasoning text whichever field carried
	// it: "reasoning_content", "reasoning" (a value mirrored in both is
	// counted once), "reasoning_details" text when neither is set, or
	// "thinking" content parts.
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	Refusal          string          `json:"refusal,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a fragment of a tool call. Index may be missing.
type ToolCallDelta struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	// Extra holds the fragment's other fields, raw, e.g. Gemini's
	// extra_content carrying a thought signature.
	Extra map[string]json.RawMessage `json:"-"`
}

// wireUsage is usage in every provider's shape: OpenAI's
// prompt_tokens_details.cached_tokens, DeepSeek's prompt_cache_hit_tokens,
// Anthropic-style cache_read_input_tokens and cache_creation_input_tokens
// (top level, beside input_tokens/output_tokens on Anthropic-shaped
// gateways), OpenRouter's prompt_tokens_details.cache_write_tokens and
// DashScope's prompt_tokens_details.cache_creation_input_tokens.
type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"` // OpenRouter
		// DashScope's explicit cache reports its writes here.
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens     int `json:"prompt_cache_hit_tokens"` // DeepSeek
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	// Anthropic's own names; its input_tokens excludes cache reads and
	// writes.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

func (w *wireUsage) usage() *Usage {
	u := &Usage{Input: w.PromptTokens, Output: w.CompletionTokens, Total: w.TotalTokens}
	u.Cached = firstPositive(w.PromptCacheHitTokens, w.CacheReadInputTokens)
	u.CacheCreation = w.CacheCreationInputTokens
	if d := w.PromptTokensDetails; d != nil {
		u.Cached = firstPositive(d.CachedTokens, u.Cached)
		u.CacheCreation = firstPositive(u.CacheCreation, d.CacheWriteTokens, d.CacheCreationInputTokens)
	}
	if u.Input == 0 && w.InputTokens > 0 { // Anthropic's shape: input is what was not cached
		u.Input = w.InputTokens + w.CacheReadInputTokens + w.CacheCreationInputTokens
	}
	if u.Output == 0 {
		u.Output = w.OutputTokens
	}
	if u.Total == 0 && u.Input+u.Output > 0 {
		u.Total = u.Input + u.Output
	}
	if d := w.CompletionTokensDetails; d != nil {
		u.Reasoning = d.ReasoningTokens
	}
	return u
}

func firstPositive(vs ...int) int {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

// decodeEvent decodes one SSE event's data into chunks. A well-formed event
// yields one chunk; data made of several JSON lines (servers that omit the
// blank line between events) yields one chunk per line. An in-band error is
// returned with the chunks decoded before it, including the choices and
// usage of the chunk that carried it (OpenRouter sends both together).
func (dec *chunkDecoder) decodeEvent(data []byte, errEvent bool) ([]Chunk, error) {
	if errEvent {
		return nil, streamEventError(data)
	}
	c, err := dec.decode(data)
	var malformed *malformedChunk
	if !errors.As(err, &malformed) || bytes.IndexByte(data, '\n') < 0 {
		if malformed != nil {
			return nil, malformed.err
		}
		if err == nil {
			return []Chunk{c}, nil
		}
		return nonEmpty(nil, c), err
	}
	var out []Chunk
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		c, err := dec.decode(line)
		if errors.As(err, &malformed) {
			return nil, malformed.err
		}
		if err != nil {
			return nonEmpty(out, c), err
		}
		out = append(out, c)
	}
	return out, nil
}

// nonEmpty appends c, the chunk that carried an in-band error, when it also
// carried choices or usage; an error alone is not a chunk.
func nonEmpty(out []Chunk, c Chunk) []Chunk {
	if len(c.Choices) == 0 && c.Usage == nil {
		return out
	}
	return append(out, c)
}

// ErrResponsesAPI: the server answered a chat completions request in the
// shape of OpenAI's Responses API (a proxy or gateway routing /chat/completions
// to a Responses endpoint); the answer cannot be read as a chat completion.
var ErrResponsesAPI = errors.New("llm: the server answered with the Responses API")

func responsesAPIError(what string) error {
	return &Error{Kind: KindBadRequest, Err: ErrResponsesAPI, Message: fmt.Sprintf(
		"the server answered a chat completions request with an OpenAI Responses API %s: the endpoint (or a proxy in front of it) "+
			"speaks the Responses API; point the base URL at an OpenAI-compatible /chat/completions endpoint", what)}
}

// malformedChunk marks a chunk that is not valid JSON of the expected shape.
type malformedChunk struct{ err error }

func (m *malformedChunk) Error() string { return m.err.Error() }

// chunkDecoder decodes a stream's chunks, reusing its wire scratch.
type chunkDecoder struct {
	w wireChunk
}

// decodeChunk decodes one chunk with a fresh decoder.
func decodeChunk(data []byte) (Chunk, error) {
	var dec chunkDecoder
	return dec.decode(data)
}

// decode decodes one chunk. A chunk carrying "error" is returned with that
// error; a malformed chunk yields a *malformedChunk. The returned chunk
// shares nothing with the scratch.
func (dec *chunkDecoder) decode(data []byte) (Chunk, error) {
	choices := dec.w.Choices[:cap(dec.w.Choices)]
	clear(choices) // encoding/json decodes into old elements without zeroing them
	dec.w = wireChunk{Choices: choices[:0]}
	w := &dec.w
	if err := json.Unmarshal(data, w); err != nil {
		return Chunk{}, &malformedChunk{&Error{Kind: KindServer, Message: fmt.Sprintf("malformed stream chunk %.200q", data), Err: err}}
	}
	if len(w.Choices) == 0 && strings.HasPrefix(w.Type, "response.") {
		return Chunk{}, &malformedChunk{responsesAPIError(fmt.Sprintf("event stream (event %q)", w.Type))}
	}
	c := Chunk{ID: w.ID, Model: w.Model, SystemFingerprint: w.SystemFingerprint, ServiceTier: w.ServiceTier}
	if u := w.usage(); u != nil {
		c.Usage = u.usage()
	}
	if len(w.Choices) > 0 {
		c.Choices = make([]ChunkChoice, len(w.Choices))
		for i := range w.Choices {
			wc := &w.Choices[i]
			c.Choices[i] = ChunkChoice{Index: wc.Index, Delta: wc.Delta.normalise(), FinishReason: wc.FinishReason}
		}
	}
	if len(w.Error) > 0 && !isNull(w.Error) {
		return c, streamEventError(w.Error)
	}
	return c, nil
}
