package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Request is a go-openai chat request plus what go-openai cannot express.
// ChatCompletionRequest.Model is ignored: the configured model of ModelType
// is used.
type Request struct {
	openai.ChatCompletionRequest

	ModelType ModelType
	// Temperature and TopP, when set, are sent even when zero (go-openai's
	// own fields drop 0 through omitempty). They shadow the embedded fields.
	Temperature *float32
	TopP        *float32
	// ExtraBody fields are merged into the top level of the JSON body, e.g.
	// vLLM's "top_k" or "chat_template_kwargs". nil values are dropped.
	ExtraBody map[string]any
	// Required lists parameters that must never be removed by the retry
	// without an unsupported parameter.
	Required []string
	// ToolCallExtra gives, by tool-call id, fields to send with assistant
	// tool calls beyond id, type and function: the ToolCall.Extra of a
	// response, for a conversation restored from storage. The client itself
	// remembers those of the calls it returned (the most recent 4096).
	ToolCallExtra map[string]map[string]json.RawMessage

	// Stability marks Messages by index (missing entries are Unmarked) for
	// prompt caching: where cache_control breakpoints go on models that
	// take them. See [PromptCacheMode].
	Stability []Stability
	// ToolsStability marks the tool list; a Volatile tool list places no
	// breakpoint, as tools come first in the cached prefix.
	ToolsStability Stability
	// CacheKey, e.g. a session id, is hashed into prompt_cache_key for
	// models that take one; empty means a hash of the model, the system
	// messages and the tool names.
	CacheKey string
}

// reservedBodyKeys may not be overridden through ExtraBody.
var reservedBodyKeys = []string{"model", "messages", "stream"}

// call is one Chat or ChatStream invocation: its model, the caller's request
// and the current sanitised plan.
type call struct {
	m       *model
	in      Request
	plan    plan
	dropped []string                              // parameters removed after the server rejected them
	extra   map[string]map[string]json.RawMessage // tool-call fields to send back
	adapted bool
	// cacheAdapted: the one retry without a prompt-cache field was made.
	cacheAdapted bool
	probing      bool // probes must send exactly what they ask for
}

func newCall(m *model, r Request) (*call, error) {
	for k, v := range r.ExtraBody {
		if slices.Contains(reservedBodyKeys, k) {
			return nil, &ConfigError{Field: "ExtraBody", Reason: "may not set " + k}
		}
		if _, err := json.Marshal(v); err != nil {
			return nil, &ConfigError{Field: "ExtraBody", Reason: fmt.Sprintf("%s: %v", k, err)}
		}
	}
	c := &call{m: m, in: r}
	c.replan()
	return c, nil
}

func (c *call) replan() {
	caps := c.m.caps.get()
	if c.probing {
		caps = Capabilities{}
	}
	mode := c.m.cacheMode
	if c.probing {
		mode = PromptCacheOff
	}
	c.plan = sanitize(c.in, target{model: c.m.cfg.Model, baseURL: c.m.cfg.BaseURL, caps: caps, cacheMode: mode})
	c.plan.patch.drop = append(c.plan.patch.drop, c.dropped...)
	c.plan.patch.toolExtra = c.extra
}

// adapt handles the one retry without an unsupported parameter. It reports
// whether the call should be sent again.
func (c *call) adapt(err error) bool {
	if c.adaptCache(err) {
		return true
	}
	var e *Error
	if c.adapted || c.probing || !errors.As(err, &e) || e.Kind != KindUnsupportedParameter || e.Param == "" {
		return false
	}
	if slices.Contains(c.in.Required, e.Param) {
		return false
	}
	c.adapted = true
	switch {
	case c.m.caps.learn(e.Param):
	case e.Param == "max_tokens" && c.in.MaxTokens > 0:
		c.in.MaxCompletionTokens, c.in.MaxTokens = c.in.MaxTokens, 0
	default:
		c.dropped = append(c.dropped, e.Param)
	}
	c.replan()
	return true
}

// adaptCache handles the one retry without a prompt-cache field: a 400 that
// names cache_control (anywhere in its message or parameter path) or
// prompt_cache_key, when the request carried it, turns that field off for
// the model. Servers name cache_control inside a path such as
// messages.0.content.0.cache_control, and some call the complaint a plain
// bad request, so this does not wait for KindUnsupportedParameter.
func (c *call) adaptCache(err error) bool {
	var e *Error
	if c.cacheAdapted || c.probing || !errors.As(err, &e) {
		return false
	}
	if e.Kind != KindUnsupportedParameter && e.Kind != KindBadRequest {
		return false
	}
	text := strings.ToLower(e.Param + " " + e.Message)
	param := ""
	switch {
	case len(c.plan.patch.cacheMarks) > 0 && strings.Contains(text, paramCacheControl):
		param = paramCacheControl
	case c.plan.patch.set[paramPromptCacheKey] != nil && strings.Contains(text, paramPromptCacheKey):
		param = paramPromptCacheKey
	default:
		return false
	}
	c.cacheAdapted = true
	c.m.caps.learn(param)
	c.replan()
	return true
}
