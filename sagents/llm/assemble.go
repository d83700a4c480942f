package llm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Chunk is one decoded stream chunk, normalised from whichever dialect the
// server speaks (see wire.go). The JSON tags only shape how a Chunk is
// marshalled (in OpenAI's names); decoding goes through the wire types.
type Chunk struct {
	ID      string        `json:"id"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"` // set on the usage chunk, often with no choices
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
	c := Chunk{ID: w.ID, Model: w.Model}
	if w.Usage != nil {
		c.Usage = w.Usage.usage()
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

// assembler accumulates chunks into a Response. Tool calls are keyed by
// (choice index, tool index); see choiceState.callFor for the fallbacks.
// What it holds is bounded by its limits.
type assembler struct {
	id, model string
	choices   []*choiceState // ordered by index
	usage     Usage
	finished  bool // some choice reported a finish reason

	lim   ResponseLimits // zero: the defaults
	bytes int            // text held: content, reasoning, refusal, tool calls
	calls int            // tool calls held, all choices
}

type choiceState struct {
	index     int
	role      string
	content   strings.Builder
	reasoning strings.Builder
	refusal   strings.Builder
	finish    string
	calls     []*callState
	last      *callState
	byWire    map[int]*callState    // latest call per server index
	byID      map[string]*callState // call per id
	nextIdx   int                   // one above the highest output index
}

type callState struct {
	index         int // the output index
	id, typ, name string
	args          strings.Builder
	extra         map[string]json.RawMessage
}

// add assembles a chunk. It fails when the chunk takes the response past its
// limits; text and choices are checked before anything of the chunk is kept,
// the number of tool calls after.
func (a *assembler) add(c *Chunk) error {
	if err := a.admit(c); err != nil {
		return err
	}
	if a.id == "" {
		a.id = c.ID
	}
	if a.model == "" {
		a.model = c.Model
	}
	if c.Usage != nil {
		a.usage = *c.Usage
	}
	for i := range c.Choices {
		a.addChoice(&c.Choices[i])
	}
	if lim := a.lim.withDefaults(); a.calls > lim.ToolCalls {
		return tooLarge(fmt.Sprintf("more than %d tool calls", lim.ToolCalls))
	}
	return nil
}

// admit checks a chunk against the limits before anything is kept.
func (a *assembler) admit(c *Chunk) error {
	lim := a.lim.withDefaults()
	n, newChoices := 0, 0
	for i := range c.Choices {
		ch := &c.Choices[i]
		d := &ch.Delta
		n += len(d.Content) + len(d.ReasoningContent) + len(d.Refusal) + len(d.Role) + len(ch.FinishReason)
		for j := range d.ToolCalls {
			t := &d.ToolCalls[j]
			n += len(t.ID) + len(t.Type) + len(t.Function.Name) + len(t.Function.Arguments)
			for k, v := range t.Extra {
				n += len(k) + len(v)
			}
		}
		if i == 0 || ch.Index != c.Choices[i-1].Index {
			if _, found := a.find(ch.Index); !found {
				newChoices++
			}
		}
	}
	switch {
	case a.bytes+n > lim.Bytes:
		return tooLarge(fmt.Sprintf("more than %d bytes of content, reasoning and tool calls", lim.Bytes))
	case len(a.choices)+newChoices > lim.Choices:
		return tooLarge(fmt.Sprintf("more than %d choices", lim.Choices))
	}
	a.bytes += n
	return nil
}

func tooLarge(what string) error {
	return &Error{Kind: KindResponseTooLarge, Message: "response holds " + what, Err: ErrResponseTooLarge}
}

func (a *assembler) addChoice(ch *ChunkChoice) {
	cs := a.choice(ch.Index)
	d := &ch.Delta
	if d.Role != "" {
		cs.role = d.Role
	}
	cs.content.WriteString(d.Content)
	cs.reasoning.WriteString(d.ReasoningContent)
	cs.refusal.WriteString(d.Refusal)
	before := len(cs.calls)
	for j := range d.ToolCalls {
		cs.addCall(&d.ToolCalls[j], j, len(d.ToolCalls))
	}
	a.calls += len(cs.calls) - before
	if ch.FinishReason != "" {
		cs.finish = ch.FinishReason
		a.finished = true
	}
}

func (a *assembler) find(index int) (int, bool) {
	return slices.BinarySearchFunc(a.choices, index, func(c *choiceState, idx int) int { return cmp.Compare(c.index, idx) })
}

func (a *assembler) choice(index int) *choiceState {
	i, found := a.find(index)
	if found {
		return a.choices[i]
	}
	cs := &choiceState{index: index}
	a.choices = slices.Insert(a.choices, i, cs)
	return cs
}

func (cs *choiceState) addCall(d *ToolCallDelta, pos, n int) {
	c := cs.callFor(d, pos, n)
	if c.id == "" && d.ID != "" {
		c.id = d.ID
		if cs.byID == nil {
			cs.byID = make(map[string]*callState)
		}
		if cs.byID[d.ID] == nil {
			cs.byID[d.ID] = c
		}
	}
	if c.typ == "" {
		c.typ = d.Type
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
	for k, v := range d.Extra {
		if c.extra == nil {
			c.extra = make(map[string]json.RawMessage, len(d.Extra))
		}
		c.extra[k] = v // a later fragment's value replaces an earlier one
	}
	cs.last = c
}

// callFor finds the call a fragment belongs to: by server index (a new id on
// a used index starts a new call, for servers that send index 0 for every
// call), else by id, else by position in the chunk (several index-less
// fragments) or the last call touched.
func (cs *choiceState) callFor(d *ToolCallDelta, pos, n int) *callState {
	if d.Index != nil {
		return cs.byWireIndex(*d.Index, d.ID)
	}
	if d.ID != "" {
		if c := cs.byID[d.ID]; c != nil {
			return c
		}
		return cs.newCall(cs.nextIdx)
	}
	if n > 1 && pos < len(cs.calls) {
		return cs.calls[pos]
	}
	if cs.last != nil {
		return cs.last
	}
	return cs.newCall(cs.nextIdx)
}

func (cs *choiceState) byWireIndex(wire int, id string) *callState {
	c := cs.byWire[wire]
	if c != nil && (id == "" || c.id == "" || id == c.id) {
		return c
	}
	index := wire
	if c != nil {
		index = cs.nextIdx // the index is reused for a new call
	}
	c = cs.newCall(index)
	if cs.byWire == nil {
		cs.byWire = make(map[int]*callState)
	}
	cs.byWire[wire] = c
	return c
}

func (cs *choiceState) newCall(index int) *callState {
	c := &callState{index: index}
	cs.calls = append(cs.calls, c)
	cs.nextIdx = max(cs.nextIdx, index+1)
	return c
}

// response builds the Response; tool-call arguments are parsed here, once
// the calls are complete.
func (a *assembler) response() *Response {
	r := &Response{ID: a.id, Model: a.model, Usage: a.usage}
	for _, cs := range a.choices {
		r.Choices = append(r.Choices, cs.build())
	}
	return r
}

func (cs *choiceState) build() Choice {
	role := cs.role
	if role == "" {
		role = openai.ChatMessageRoleAssistant
	}
	ch := Choice{Index: cs.index, FinishReason: openai.FinishReason(cs.finish)}
	ch.Message = openai.ChatCompletionMessage{
		Role: role, Content: cs.content.String(),
		ReasoningContent: cs.reasoning.String(), Refusal: cs.refusal.String(),
	}
	calls := slices.Clone(cs.calls)
	slices.SortStableFunc(calls, func(a, b *callState) int { return cmp.Compare(a.index, b.index) })
	for _, c := range calls {
		tc := finishToolCall(c.index, c.id, c.typ, c.name, c.args.String())
		tc.Extra = maps.Clone(c.extra) // each Response owns its maps
		ch.ToolCalls = append(ch.ToolCalls, tc)
		ch.Message.ToolCalls = append(ch.Message.ToolCalls, openai.ToolCall{
			ID: tc.ID, Type: openai.ToolType(tc.Type),
			Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Raw},
		})
	}
	return ch
}
