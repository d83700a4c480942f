package llm

import (
	"encoding/json"
	"fmt"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// Tool calls may carry fields beyond id, type and function that the server
// needs back on the next turn: Gemini 3 rejects a conversation whose tool
// call lost its extra_content.google.thought_signature. go-openai's ToolCall
// cannot hold them, so the client remembers them by call id when it returns
// a response and the transport puts them back into assistant messages that
// carry those calls.

// maxRememberedExtras bounds the calls whose extra fields a client keeps;
// the oldest are forgotten first.
const maxRememberedExtras = 4096

type extraStore struct {
	mu    sync.Mutex
	m     map[string]map[string]json.RawMessage
	order []string // ids in the order they were remembered
}

// remember keeps the extra fields of resp's tool calls.
func (s *extraStore) remember(resp *Response) {
	if resp == nil {
		return
	}
	for _, ch := range resp.Choices {
		for _, tc := range ch.ToolCalls {
			if tc.ID != "" && len(tc.Extra) > 0 {
				s.put(tc.ID, tc.Extra)
			}
		}
	}
}

func (s *extraStore) put(id string, extra map[string]json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]map[string]json.RawMessage)
	}
	if _, ok := s.m[id]; !ok {
		s.order = append(s.order, id)
	}
	s.m[id] = extra
	for len(s.order) > maxRememberedExtras {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
}

// forMessages returns the extra fields to send for the tool calls of the
// assistant messages in msgs: the caller's own (Request.ToolCallExtra) first,
// else those remembered. nil when there are none.
func (s *extraStore) forMessages(msgs []openai.ChatCompletionMessage, own map[string]map[string]json.RawMessage) map[string]map[string]json.RawMessage {
	var out map[string]map[string]json.RawMessage
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			if tc.ID == "" {
				continue
			}
			x, ok := own[tc.ID]
			if !ok {
				x, ok = s.m[tc.ID]
			}
			if ok && len(x) > 0 {
				if out == nil {
					out = make(map[string]map[string]json.RawMessage)
				}
				out[tc.ID] = x
			}
		}
	}
	return out
}

// addToolCallExtras adds the extra fields to the tool calls, by id, of the
// body's assistant messages. A field already present is left alone.
func addToolCallExtras(obj map[string]json.RawMessage, extras map[string]map[string]json.RawMessage) error {
	return rewriteMessages(obj, func(m map[string]json.RawMessage) (bool, error) {
		if len(m["tool_calls"]) == 0 || isNull(m["tool_calls"]) {
			return false, nil
		}
		var calls []map[string]json.RawMessage
		if err := json.Unmarshal(m["tool_calls"], &calls); err != nil {
			return false, fmt.Errorf("llm: rewriting tool calls: %w", err)
		}
		touched := false
		for _, c := range calls {
			var id string
			if !jsonString(c["id"], &id) {
				continue
			}
			for k, v := range extras[id] {
				if _, has := c[k]; !has {
					c[k] = v
					touched = true
				}
			}
		}
		if !touched {
			return false, nil
		}
		raw, err := json.Marshal(calls)
		if err != nil {
			return false, fmt.Errorf("llm: rewriting tool calls: %w", err)
		}
		m["tool_calls"] = raw
		return true, nil
	})
}
