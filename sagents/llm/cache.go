package llm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// Stability is the caller's mark on a message (or the tool list): how likely
// it is to be sent again, byte for byte, on the next call. The zero value is
// Unmarked.
type Stability int8

// The marks.
const (
	Unmarked   Stability = iota
	Stable               // the same for the whole session: system prompt, skills, tools
	SemiStable           // changes now and then: a summary, a memory block
	Volatile             // changes every call: never worth a cache breakpoint
)

// PromptCacheMode selects how the client asks providers to cache prompts.
type PromptCacheMode string

// The modes. The zero value takes SAGE_PROMPT_CACHE, else PromptCacheAuto.
const (
	// PromptCacheAuto picks by provider and model family: cache_control
	// breakpoints where the model's capabilities say it takes them (Claude
	// models anywhere, Qwen on DashScope, anthropic/* and google/gemini*
	// through OpenRouter), prompt_cache_key where it takes that (OpenAI),
	// and nothing a server may reject elsewhere.
	PromptCacheAuto PromptCacheMode = "auto"
	// PromptCacheBreakpoints sends cache_control breakpoints unless the
	// model is known to reject them.
	PromptCacheBreakpoints PromptCacheMode = "breakpoints"
	// PromptCacheKey sends prompt_cache_key unless the model is known to
	// reject it.
	PromptCacheKey PromptCacheMode = "key"
	// PromptCacheOff sends neither.
	PromptCacheOff PromptCacheMode = "off"
)

// EnvPromptCache names the environment variable read when
// Config.PromptCache is empty.
const EnvPromptCache = "SAGE_PROMPT_CACHE"

// ParsePromptCacheMode parses "auto", "breakpoints", "key" or "off" (case
// and surrounding space ignored); "" is auto.
func ParsePromptCacheMode(s string) (PromptCacheMode, error) {
	switch m := PromptCacheMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return PromptCacheAuto, nil
	case PromptCacheAuto, PromptCacheBreakpoints, PromptCacheKey, PromptCacheOff:
		return m, nil
	}
	return "", fmt.Errorf("prompt cache mode %q: want auto, breakpoints, key or off", s)
}

// promptCacheMode resolves the configured mode: the field, else the
// environment, else auto.
func promptCacheMode(field PromptCacheMode) (PromptCacheMode, error) {
	src, v := "PromptCache", string(field)
	if v == "" {
		src, v = EnvPromptCache, os.Getenv(EnvPromptCache)
	}
	m, err := ParsePromptCacheMode(v)
	if err != nil {
		return "", &ConfigError{Field: src, Reason: err.Error()}
	}
	return m, nil
}

// Breakpoint placement bounds.
const (
	// MaxCacheBreakpoints is the most cache_control markers one request
	// carries: Anthropic's limit, which DashScope and OpenRouter share.
	MaxCacheBreakpoints = 4
	// MinCachedSystemChars and MinCachedUserChars are the shortest system
	// and user segments worth a breakpoint; the conversation-tail
	// breakpoint needs MinCachedUserChars of prefix in all.
	MinCachedSystemChars = 500
	MinCachedUserChars   = 1000
)

// cacheDefaults is the table of what providers are known to take, by base
// URL and model name. Capabilities from the configuration and from probes
// take precedence; a server's 400 naming the field overrides it.
func cacheDefaults(baseURL, model string) Capabilities {
	host := ""
	if u, err := url.Parse(baseURL); err == nil {
		host = strings.ToLower(u.Hostname())
	}
	name := strings.ToLower(model)
	onHost := func(h string) bool { return host == h || strings.HasSuffix(host, "."+h) }
	var c Capabilities
	switch {
	case onHost("openrouter.ai"):
		if strings.HasPrefix(name, "anthropic/") || strings.HasPrefix(name, "google/gemini") {
			c.CacheControl = Supported
		}
	case onHost("anthropic.com"):
		c.CacheControl = Supported
	case onHost("aliyuncs.com") && strings.Contains(host, "dashscope"):
		if strings.HasPrefix(name, "qwen") {
			c.CacheControl = Supported
		}
	case onHost("api.openai.com"):
		c.PromptCacheKey = Supported
	}
	if strings.Contains(name, "claude") {
		c.CacheControl = Supported
	}
	return c
}

// cacheRequest is what the prompt-cache rule needs from the caller.
type cacheRequest struct {
	marks     []Stability
	tools     Stability
	key       string
	extraKeys map[string]any
}

// rulePromptCache adds cache breakpoints or a cache key, by mode and
// capabilities. It never does both. A prompt_cache_key the caller put in
// ExtraBody is kept, unless the model is known to reject it.
func rulePromptCache(p *plan, t target, r cacheRequest) {
	if t.caps.PromptCacheKey == Unsupported {
		delete(p.patch.set, paramPromptCacheKey) // the caller's ExtraBody too, as tools go when unsupported
	}
	switch t.cacheMode {
	case PromptCacheOff, "":
		return
	case PromptCacheBreakpoints:
		if t.caps.CacheControl != Unsupported {
			p.patch.cacheMarks = placeBreakpoints(p.req.Messages, r.marks, r.tools, toolsChars(p.req.Tools))
		}
		return
	case PromptCacheKey:
		if t.caps.PromptCacheKey != Unsupported {
			setCacheKey(p, t, r)
		}
		return
	}
	switch { // auto
	case t.caps.CacheControl == Supported:
		p.patch.cacheMarks = placeBreakpoints(p.req.Messages, r.marks, r.tools, toolsChars(p.req.Tools))
	case t.caps.PromptCacheKey == Supported:
		setCacheKey(p, t, r)
	}
}

// setCacheKey sends prompt_cache_key unless the caller set it in ExtraBody.
// The key is a hash: of the caller's key (a session id) when given, else of
// the model and the stable prefix (system messages and tools), so that
// session ids do not leave the process and the key's length is bounded.
func setCacheKey(p *plan, t target, r cacheRequest) {
	if _, ok := r.extraKeys["prompt_cache_key"]; ok {
		return
	}
	h := sha256.New()
	h.Write([]byte(t.model))
	h.Write([]byte{0})
	if r.key != "" {
		h.Write([]byte(r.key))
	} else {
		for _, m := range p.req.Messages {
			if m.Role != openai.ChatMessageRoleSystem && m.Role != openai.ChatMessageRoleDeveloper {
				break
			}
			h.Write([]byte(m.Content))
			for _, part := range m.MultiContent {
				h.Write([]byte(part.Text))
			}
			h.Write([]byte{0})
		}
		for _, tool := range p.req.Tools {
			if tool.Function != nil {
				h.Write([]byte(tool.Function.Name))
				h.Write([]byte{0})
			}
		}
	}
	p.patch.set["prompt_cache_key"] = "sage-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// toolsChars is the size of the tool definitions as sent (their JSON), in
// characters: the providers put them first in the cached prefix (tools,
// then system, then messages), so they count towards a breakpoint's
// prefix.
func toolsChars(tools []openai.Tool) int {
	if len(tools) == 0 {
		return 0
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return 0
	}
	return utf8.RuneCount(b)
}

// messageText is a message's text and whether it has any content a marker
// can be put on.
func messageChars(m openai.ChatCompletionMessage) (n int, markable bool) {
	if len(m.MultiContent) > 0 {
		for _, p := range m.MultiContent {
			n += utf8.RuneCountInString(p.Text)
		}
		return n, true
	}
	return utf8.RuneCountInString(m.Content), m.Content != ""
}

func isSystem(role string) bool {
	return role == openai.ChatMessageRoleSystem || role == openai.ChatMessageRoleDeveloper
}

// placeBreakpoints returns the indexes of the messages (ascending, at most
// MaxCacheBreakpoints) whose last content part gets a cache_control marker.
//
// With marks: the end of each run of Stable messages, the latest non-tool
// message that is not Volatile, then the end of each run of SemiStable
// messages. Without marks: the longest system message, the longest user
// message, and the latest non-tool message. Tool messages, messages without
// content and segments shorter than their minimum are skipped; a Volatile
// tool list (it precedes every message in the cached prefix) places none.
// toolChars, the size of the tool definitions, counts in the prefix: a
// segment that starts the conversation (a short system prompt after
// several KB of tools) is measured with them, as the tail is. When there
// are more candidates than the limit, the conversation tail is kept first,
// then the later segments.
func placeBreakpoints(msgs []openai.ChatCompletionMessage, marks []Stability, tools Stability, toolChars int) []int {
	if tools == Volatile || len(msgs) == 0 {
		return nil
	}
	mark := func(i int) Stability {
		if i < len(marks) {
			return marks[i]
		}
		return Unmarked
	}
	chars := make([]int, len(msgs))
	ok := make([]bool, len(msgs))
	prefix := make([]int, len(msgs)) // characters up to and including i
	for i, m := range msgs {
		chars[i], ok[i] = messageChars(m)
		ok[i] = ok[i] && m.Role != openai.ChatMessageRoleTool
		prefix[i] = chars[i]
		if i > 0 {
			prefix[i] += prefix[i-1]
		} else {
			prefix[i] += toolChars
		}
	}
	// long reports whether the segment of n characters ending at message i
	// is worth a breakpoint.
	long := func(i, n int) bool {
		if isSystem(msgs[i].Role) {
			return n >= MinCachedSystemChars
		}
		return n >= MinCachedUserChars
	}
	tail := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if ok[i] && mark(i) != Volatile {
			if prefix[i] >= MinCachedUserChars {
				tail = i
			}
			break
		}
	}
	var out []int
	add := func(i int) {
		if i >= 0 && len(out) < MaxCacheBreakpoints && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	add(tail)
	if slices.ContainsFunc(marks, func(s Stability) bool { return s != Unmarked }) {
		for _, want := range []Stability{Stable, SemiStable} {
			for i := len(msgs) - 1; i >= 0; i-- {
				if mark(i) != want || (i+1 < len(msgs) && mark(i+1) == want) {
					continue // not the end of a run
				}
				start := i
				for start > 0 && mark(start-1) == want {
					start--
				}
				n := prefix[i]
				if start > 0 {
					n -= prefix[start-1]
				}
				if ok[i] && long(i, n) {
					add(i)
				}
			}
		}
	} else {
		// The first message's segment starts with the tools.
		longEnough := func(i int) bool {
			if i == 0 {
				return long(i, prefix[0])
			}
			return long(i, chars[i])
		}
		add(longest(msgs, ok, longEnough, isSystem))
		add(longest(msgs, ok, longEnough, func(r string) bool { return r == openai.ChatMessageRoleUser }))
	}
	slices.Sort(out)
	return out
}

// longest returns the index of the longest markable, long enough message of
// a role, the earliest among equals, or -1.
func longest(msgs []openai.ChatCompletionMessage, ok []bool, long func(int) bool, role func(string) bool) int {
	best, bestN := -1, -1
	for i, m := range msgs {
		if !ok[i] || !role(m.Role) || !long(i) {
			continue
		}
		if n, _ := messageChars(m); n > bestN { // chars[i], recounted only for candidates
			best, bestN = i, n
		}
	}
	return best
}

// ephemeral is the marker Anthropic, DashScope and OpenRouter take.
var ephemeral = json.RawMessage(`{"type":"ephemeral"}`)

// markCacheBreakpoints puts the marker on the last content part of the
// messages at idx, turning string content into one text part.
func markCacheBreakpoints(obj map[string]json.RawMessage, idx []int) error {
	var msgs []json.RawMessage
	if err := json.Unmarshal(obj["messages"], &msgs); err != nil {
		return fmt.Errorf("llm: rewriting messages: %w", err)
	}
	for _, i := range idx {
		if i < 0 || i >= len(msgs) {
			return fmt.Errorf("llm: cache breakpoint on message %d of %d", i, len(msgs))
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(msgs[i], &m); err != nil {
			return fmt.Errorf("llm: rewriting message %d: %w", i, err)
		}
		parts, err := contentParts(m["content"])
		if err != nil {
			return fmt.Errorf("llm: rewriting message %d: %w", i, err)
		}
		if len(parts) == 0 {
			continue // nothing to mark: no breakpoint rather than an empty block
		}
		parts[len(parts)-1]["cache_control"] = ephemeral
		if m["content"], err = json.Marshal(parts); err != nil {
			return err
		}
		if msgs[i], err = json.Marshal(m); err != nil {
			return err
		}
	}
	// The array is spliced, not marshalled again: the body is compacted
	// once more when the object is marshalled.
	n := 2 + len(msgs)
	for _, m := range msgs {
		n += len(m)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	obj["messages"] = append(out, ']')
	return nil
}

// contentParts returns content as a list of parts: a non-empty string
// becomes one text part; null and "" are no parts.
func contentParts(raw json.RawMessage) ([]map[string]json.RawMessage, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return []map[string]json.RawMessage{{"type": json.RawMessage(`"text"`), "text": raw}}, nil
	}
	var parts []map[string]json.RawMessage
	err := json.Unmarshal(raw, &parts)
	return parts, err
}
