package llmtest

import (
	"fmt"
	"strings"
)

// Model is the model name the fake server reports.
const Model = "fake-model"

// Chunk is a chat.completion.chunk with one choice; delta is a JSON object
// and finish is "" for null.
func Chunk(choice int, delta, finish string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,`+
		`"model":%q,"system_fingerprint":"fp_1","choices":[{"index":%d,"delta":%s,"logprobs":null,"finish_reason":%s}]}`,
		Model, choice, delta, nullable(finish))
}

// UsageChunk is the final chunk sent with stream_options.include_usage: its
// choices are empty.
func UsageChunk(input, output, cached, reasoning int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
		`"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}}`,
		Model, input, output, input+output, cached, reasoning)
}

// TextEvents streams text as the OpenAI API does: a role chunk, one chunk per
// piece, and a finish chunk.
func TextEvents(pieces ...string) []string {
	ev := []string{Chunk(0, `{"role":"assistant","content":""}`, "")}
	for _, p := range pieces {
		ev = append(ev, Chunk(0, fmt.Sprintf(`{"content":%s}`, quote(p)), ""))
	}
	return append(ev, Chunk(0, `{}`, "stop"))
}

// Text is a streamed reply of text.
func Text(pieces ...string) Reply { return Reply{Events: TextEvents(pieces...)} }

// ChatJSON is a non-streaming chat.completion body with one choice.
func ChatJSON(content string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":%q,`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`, Model, quote(content))
}

// Chat is a non-streaming reply of content.
func Chat(content string) Reply { return Reply{Body: ChatJSON(content)} }

// Error is an error reply in OpenAI's envelope.
func Error(status int, typ, code, param, message string) Reply {
	return Reply{Status: status, Body: errorBody(typ, code, param, message)}
}

// ToolCallDelta is a tool_calls delta fragment; index < 0 omits the index,
// and empty id or name are omitted.
func ToolCallDelta(index int, id, name, args string) string {
	var parts []string
	if index >= 0 {
		parts = append(parts, fmt.Sprintf(`"index":%d`, index))
	}
	if id != "" {
		parts = append(parts, fmt.Sprintf(`"id":%s,"type":"function"`, quote(id)))
	}
	fn := []string{fmt.Sprintf(`"arguments":%s`, quote(args))}
	if name != "" {
		fn = append([]string{fmt.Sprintf(`"name":%s`, quote(name))}, fn...)
	}
	parts = append(parts, `"function":{`+strings.Join(fn, ",")+`}`)
	return "{" + strings.Join(parts, ",") + "}"
}

// ToolCalls is a delta carrying the given tool_calls fragments.
func ToolCalls(frags ...string) string {
	return `{"tool_calls":[` + strings.Join(frags, ",") + `]}`
}
