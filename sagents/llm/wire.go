package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// The wire shapes of chat completion chunks and messages as servers really
// send them. They are decoded here and normalised into [Chunk] and
// [Response], so that the public types carry one meaning whatever the
// provider's dialect:
//
//   - "content" is a string, null, or (Mistral) an array of typed parts:
//     {"type":"text","text":...} is content, {"type":"thinking","thinking":...}
//     is reasoning, {"type":"refusal","refusal":...} is a refusal;
//   - reasoning arrives as "reasoning_content" (DeepSeek, vLLM, xAI, Z.ai),
//     "reasoning" (Groq, OpenRouter, vLLM >= 0.10), both carrying the same
//     text (StepFun, mlx, vLLM in between: counted once), or only in
//     "reasoning_details"[].text (OpenRouter, Snowflake Cortex);
//   - tool calls carry fields of their own (Gemini's extra_content with its
//     thought signature) that must be sent back unchanged;
//   - usage arrives in "usage", or (Groq, when stream_options was not
//     sent) only in "x_groq"."usage".

type wireChunk struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Choices           []wireChoice    `json:"choices"`
	Usage             *wireUsage      `json:"usage"`
	Error             json.RawMessage `json:"error"`
	SystemFingerprint string          `json:"system_fingerprint"`
	ServiceTier       string          `json:"service_tier"`
	XGroq             *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"x_groq"`
	// Type is set on the events of OpenAI's Responses API
	// ("response.created", ...), which are no chat completion chunks.
	Type string `json:"type"`
}

// usage is the chunk's usage wherever the server put it.
func (w *wireChunk) usage() *wireUsage {
	if w.Usage == nil && w.XGroq != nil {
		return w.XGroq.Usage
	}
	return w.Usage
}

type wireChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	FinishReason string    `json:"finish_reason"`
}

// wireDelta is a stream delta or a complete message: they have one shape.
type wireDelta struct {
	Role             string           `json:"role"`
	Content          wireContent      `json:"content"`
	ReasoningContent string           `json:"reasoning_content"`
	Reasoning        string           `json:"reasoning"`
	ReasoningDetails reasoningDetails `json:"reasoning_details"`
	Refusal          string           `json:"refusal"`
	ToolCalls        []ToolCallDelta  `json:"tool_calls"`
}

// normalise turns a wire delta into the public one.
func (w *wireDelta) normalise() ChunkDelta {
	d := ChunkDelta{Role: w.Role, Content: w.Content.text, Refusal: w.Refusal, ToolCalls: w.ToolCalls}
	d.ReasoningContent = reasoningOf(w.ReasoningContent, w.Reasoning, w.ReasoningDetails.text)
	if w.Content.thinking != "" {
		d.ReasoningContent += w.Content.thinking
	}
	if w.Content.refusal != "" {
		d.Refusal += w.Content.refusal
	}
	return d
}

// reasoningOf picks a delta's reasoning text: reasoning_content and
// reasoning, a mirrored value once; reasoning_details only when neither
// carries anything (OpenRouter sends the same text in both places).
func reasoningOf(rc, r, details string) string {
	switch {
	case r == "" || r == rc:
		if rc == "" {
			return details
		}
		return rc
	case rc == "":
		return r
	}
	return rc + r
}

// wireContent is "content" in any of its shapes.
type wireContent struct {
	text, thinking, refusal string
}

func (c *wireContent) UnmarshalJSON(b []byte) error {
	*c = wireContent{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return errors.New("llm: empty content value")
	}
	switch b[0] {
	case 'n':
		return nil
	case '"':
		s, err := unquote(b)
		c.text = s
		return err
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		for i := range parts {
			c.addPart(&parts[i])
		}
		return nil
	case '{': // a single part instead of an array
		var p contentPart
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		c.addPart(&p)
		return nil
	}
	return errors.New("llm: content is neither a string nor an array of parts")
}

func (c *wireContent) addPart(p *contentPart) {
	switch p.Type {
	case "text", "output_text", "":
		c.text += p.Text
	case "thinking", "reasoning":
		c.thinking += p.Thinking.text + p.Reasoning.text
	case "refusal":
		c.refusal += p.Refusal
	}
	// other parts (images, references) carry no text for the conversation
}

// contentPart is one typed part. "thinking" is a string or (Mistral) an
// array of text parts.
type contentPart struct {
	Type      string    `json:"type"`
	Text      string    `json:"text"`
	Thinking  nestedTxt `json:"thinking"`
	Reasoning nestedTxt `json:"reasoning"`
	Refusal   string    `json:"refusal"`
}

// nestedTxt is a string or an array of {"type":"text","text":...} parts.
type nestedTxt struct{ text string }

func (n *nestedTxt) UnmarshalJSON(b []byte) error {
	n.text = ""
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] == 'n' {
		return nil
	}
	if b[0] == '"' {
		s, err := unquote(b)
		n.text = s
		return err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			n.text += p.Text
		}
	}
	return nil
}

// reasoningDetails is OpenRouter's reasoning_details: the text of its
// reasoning.text and reasoning.summary entries. Encrypted entries carry no
// text. A value of another shape is ignored rather than failing the chunk.
type reasoningDetails struct{ text string }

func (r *reasoningDetails) UnmarshalJSON(b []byte) error {
	r.text = ""
	if len(b) == 0 || b[0] != '[' {
		return nil
	}
	var items []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Summary string `json:"summary"`
	}
	if json.Unmarshal(b, &items) != nil {
		return nil
	}
	for _, it := range items {
		switch it.Type {
		case "reasoning.summary":
			r.text += it.Summary
		default:
			r.text += it.Text
		}
	}
	return nil
}

// UnmarshalJSON decodes a tool-call fragment. Fields other than index, id,
// type and function are kept in Extra, raw. "arguments" given as a JSON
// object rather than a string is kept as its JSON text.
func (d *ToolCallDelta) UnmarshalJSON(b []byte) error {
	*d = ToolCallDelta{}
	return eachMember(b, func(key, val []byte) error {
		switch string(key) {
		case "index":
			d.Index = nil
			if isNull(val) {
				return nil
			}
			n, err := strconv.Atoi(string(val))
			if err != nil {
				return errors.New("llm: tool call index is not an integer")
			}
			d.Index = &n
		case "id":
			d.ID = ""
			return stringValue(val, &d.ID)
		case "type":
			d.Type = ""
			return stringValue(val, &d.Type)
		case "function": // a repeated key replaces, as encoding/json does
			d.Function.Name, d.Function.Arguments = "", ""
			if isNull(val) {
				return nil
			}
			return eachMember(val, func(k, v []byte) error {
				switch string(k) {
				case "name":
					d.Function.Name = ""
					return stringValue(v, &d.Function.Name)
				case "arguments":
					d.Function.Arguments = ""
					if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
						d.Function.Arguments = string(v)
						return nil
					}
					return stringValue(v, &d.Function.Arguments)
				}
				return nil
			})
		default:
			if isNull(val) {
				delete(d.Extra, string(key))
				return nil
			}
			if d.Extra == nil {
				d.Extra = make(map[string]json.RawMessage, 1)
			}
			d.Extra[string(key)] = json.RawMessage(bytes.Clone(val))
		}
		return nil
	})
}
