package llm

import (
	"encoding/json"
	"fmt"
	"sync"
)

// Support is a tri-state capability answer. The zero value is Unknown, which
// means "send it and learn from the error"; only Unsupported strips anything.
type Support int8

// The three states of a capability.
const (
	Unknown Support = iota
	Supported
	Unsupported
)

func (s Support) String() string {
	switch s {
	case Supported:
		return "supported"
	case Unsupported:
		return "unsupported"
	}
	return "unknown"
}

// MarshalText renders the state as "unknown", "supported" or "unsupported".
func (s Support) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses what MarshalText writes.
func (s *Support) UnmarshalText(b []byte) error {
	switch string(b) {
	case "unknown", "":
		*s = Unknown
	case "supported":
		*s = Supported
	case "unsupported":
		*s = Unsupported
	default:
		return fmt.Errorf("llm: unknown capability state %q", b)
	}
	return nil
}

// Capabilities of one model.
type Capabilities struct {
	Multimodal       Support `json:"multimodal"`
	StructuredOutput Support `json:"structured_output"`
	Tools            Support `json:"tools"`
	ReasoningEffort  Support `json:"reasoning_effort"`
	// CacheControl: cache_control breakpoints on content parts
	// (Anthropic-compatible endpoints, DashScope, OpenRouter).
	CacheControl Support `json:"cache_control"`
	// PromptCacheKey: OpenAI's prompt_cache_key.
	PromptCacheKey Support `json:"prompt_cache_key"`
}

// merge returns c with every Unknown field taken from other.
func (c Capabilities) merge(other Capabilities) Capabilities {
	pick := func(a, b Support) Support {
		if a == Unknown {
			return b
		}
		return a
	}
	return Capabilities{
		Multimodal:       pick(c.Multimodal, other.Multimodal),
		StructuredOutput: pick(c.StructuredOutput, other.StructuredOutput),
		Tools:            pick(c.Tools, other.Tools),
		ReasoningEffort:  pick(c.ReasoningEffort, other.ReasoningEffort),
		CacheControl:     pick(c.CacheControl, other.CacheControl),
		PromptCacheKey:   pick(c.PromptCacheKey, other.PromptCacheKey),
	}
}

func (c Capabilities) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// capabilityParams maps request parameters to the capability they need.
var capabilityParams = map[string]func(*Capabilities) *Support{
	"reasoning_effort":    func(c *Capabilities) *Support { return &c.ReasoningEffort },
	"response_format":     func(c *Capabilities) *Support { return &c.StructuredOutput },
	"tools":               func(c *Capabilities) *Support { return &c.Tools },
	"tool_choice":         func(c *Capabilities) *Support { return &c.Tools },
	"parallel_tool_calls": func(c *Capabilities) *Support { return &c.Tools },
	paramImage:            func(c *Capabilities) *Support { return &c.Multimodal },
	paramCacheControl:     func(c *Capabilities) *Support { return &c.CacheControl },
	paramPromptCacheKey:   func(c *Capabilities) *Support { return &c.PromptCacheKey },
}

// The prompt-cache parameters. cache_control is not a top-level field: it
// sits on content parts, so servers name it inside a path.
const (
	paramCacheControl   = "cache_control"
	paramPromptCacheKey = "prompt_cache_key"
)

// capStore holds a model's capabilities; errors and probes update it.
type capStore struct {
	mu   sync.RWMutex
	caps Capabilities
}

func (s *capStore) get() Capabilities {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.caps
}

// learn records that param is unsupported; it reports whether param maps to a
// capability.
func (s *capStore) learn(param string) bool {
	field, ok := capabilityParams[param]
	if !ok {
		return false
	}
	s.mu.Lock()
	*field(&s.caps) = Unsupported
	s.mu.Unlock()
	return true
}

// fill sets every Unknown field from c (a table's defaults).
func (s *capStore) fill(c Capabilities) {
	s.mu.Lock()
	s.caps = s.caps.merge(c)
	s.mu.Unlock()
}

// apply overwrites every field that the probe answered (not Unknown).
func (s *capStore) apply(c Capabilities) {
	s.mu.Lock()
	s.caps = c.merge(s.caps)
	s.mu.Unlock()
}
