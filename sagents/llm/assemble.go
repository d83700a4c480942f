package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Chunk is one decoded stream chunk.
type Chunk struct {
	ID      string        `json:"id"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"-"` // set on the usage chunk, often with no choices
}

// ChunkChoice is one choice's delta in a chunk.
type ChunkChoice struct {
	Index        int        `json:"index"`
	Delta        ChunkDelta `json:"delta"`
	FinishReason string     `json:"finish_reason"`
}

// ChunkDelta is the incremental content of a choice. Reasoning text arrives as
// "reasoning_content" (DeepSeek, vLLM) or "reasoning" (newer vLLM, OpenRouter).
type ChunkDelta struct {
	Role             string          `json:"role"`
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	Refusal          string          `json:"refusal"`
	ToolCalls        []ToolCallDelta `json:"tool_calls"`
}

// ToolCallDelta is a fragment of a tool call. Index may be missing.
type ToolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"` // DeepSeek
}

func (w *wireUsage) usage() *Usage {
	u := &Usage{Input: w.PromptTokens, Output: w.CompletionTokens, Total: w.TotalTokens, Cached: w.PromptCacheHitTokens}
	if d := w.PromptTokensDetails; d != nil && d.CachedTokens > 0 {
		u.Cached = d.CachedTokens
	}
	if d := w.CompletionTokensDetails; d != nil {
		u.Reasoning = d.ReasoningTokens
	}
	return u
}

type wireChunk struct {
	Chunk
	Usage *wireUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// decodeEvent decodes one SSE event's data into chunks. A well-formed event
// yields one chunk; data made of several JSON lines (servers that omit the
// blank line between events) yields one chunk per line.
func decodeEvent(data []byte, errEvent bool) ([]Chunk, error) {
	if errEvent {
		return nil, streamEventError(data)
	}
	c, err := decodeChunk(data)
	if err == nil || bytes.IndexByte(data, '\n') < 0 {
		if err != nil {
			return nil, err
		}
		return []Chunk{c}, nil
	}
	var out []Chunk
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		c, err := decodeChunk(line)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func decodeChunk(data []byte) (Chunk, error) {
	var w wireChunk
	if err := json.Unmarshal(data, &w); err != nil {
		return Chunk{}, &Error{Kind: KindServer, Message: fmt.Sprintf("malformed stream chunk %.200q", data), Err: err}
	}
	if len(w.Error) > 0 && !bytes.Equal(w.Error, []byte("null")) {
		return Chunk{}, streamEventError(w.Error)
	}
	if w.Usage != nil {
		w.Chunk.Usage = w.Usage.usage()
	}
	return w.Chunk, nil
}

// assembler accumulates chunks into a Response. Tool calls are keyed by
// (choice index, tool index); see choiceState.callFor for the fallbacks.
type assembler struct {
	id, model string
	choices   []*choiceState // ordered by index
	usage     Usage
	finished  bool // some choice reported a finish reason
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
}

func (a *assembler) add(c *Chunk) {
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
}

func (a *assembler) addChoice(ch *ChunkChoice) {
	cs := a.choice(ch.Index)
	d := &ch.Delta
	if d.Role != "" {
		cs.role = d.Role
	}
	cs.content.WriteString(d.Content)
	cs.reasoning.WriteString(d.ReasoningContent)
	cs.reasoning.WriteString(d.Reasoning)
	cs.refusal.WriteString(d.Refusal)
	for j := range d.ToolCalls {
		cs.addCall(&d.ToolCalls[j], j, len(d.ToolCalls))
	}
	if ch.FinishReason != "" {
		cs.finish = ch.FinishReason
		a.finished = true
	}
}

func (a *assembler) choice(index int) *choiceState {
	i, found := slices.BinarySearchFunc(a.choices, index, func(c *choiceState, idx int) int { return c.index - idx })
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
	slices.SortStableFunc(calls, func(a, b *callState) int { return a.index - b.index })
	for _, c := range calls {
		tc := finishToolCall(c.index, c.id, c.typ, c.name, c.args.String())
		ch.ToolCalls = append(ch.ToolCalls, tc)
		ch.Message.ToolCalls = append(ch.Message.ToolCalls, openai.ToolCall{
			ID: tc.ID, Type: openai.ToolType(tc.Type),
			Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Raw},
		})
	}
	return ch
}
