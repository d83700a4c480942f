package llm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

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

	fingerprint, tier string // system_fingerprint, service_tier
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
	if c.SystemFingerprint != "" && len(c.SystemFingerprint) <= 256 {
		a.fingerprint = c.SystemFingerprint
	}
	if c.ServiceTier != "" && len(c.ServiceTier) <= 64 {
		a.tier = c.ServiceTier
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
	r := &Response{ID: a.id, Model: a.model, Usage: a.usage, SystemFingerprint: a.fingerprint, ServiceTier: a.tier}
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
