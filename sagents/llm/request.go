package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
	probing bool // probes must send exactly what they ask for
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
	c.plan = sanitize(c.in, target{model: c.m.cfg.Model, baseURL: c.m.cfg.BaseURL, caps: caps})
	c.plan.patch.drop = append(c.plan.patch.drop, c.dropped...)
	c.plan.patch.toolExtra = c.extra
}

// adapt handles the one retry without an unsupported parameter. It reports
// whether the call should be sent again.
func (c *call) adapt(err error) bool {
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
