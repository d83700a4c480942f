package llm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/llm/llmtest"
)

// FuzzStreamAssembler feeds arbitrary bytes through the SSE reader, the chunk
// decoder and the tool-call assembler. It must never panic, every error must
// be typed, and every assembled tool call must carry valid JSON arguments or
// an ArgumentsError with the raw text.
func FuzzStreamAssembler(f *testing.F) {
	f.Add(sseBody(llmtest.TextEvents("hel", "lo")...))
	f.Add(sseBody(append(llmtest.TextEvents("x"), llmtest.UsageChunk(1, 2, 0, 0))...))
	f.Add(sseBody(": keep-alive", llmtest.Chunk(0, `{"reasoning":"r"}`, ""), "event: error", `{"error":{"message":"m"}}`))
	f.Add(sseBody(
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(7, "a", "f", `{"q":`), llmtest.ToolCallDelta(7, "", "", `1}`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(-1, "", "", `x`), llmtest.ToolCallDelta(-1, "b", "", ``)), ""),
		llmtest.Chunk(2, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "c", "g", `[`)), "tool_calls")))
	f.Add("data: {\"choices\":[{\"index\":-5,\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\r\n\r\ndata: [DONE]")
	f.Add("data: {\"choices\":[]}\ndata: {\"choices\":[{}]}\n\n")
	f.Add("data: {\"error\":null,\"choices\":null}\n\n:\n\nevent:error\ndata:\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		resp, err := readAllEvents(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) && !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
		for _, ch := range resp.Choices {
			for _, tc := range ch.ToolCalls {
				if tc.ArgumentsErr == nil && !json.Valid(tc.Arguments) {
					t.Fatalf("invalid arguments without error: %q", tc.Arguments)
				}
				if tc.ArgumentsErr != nil && tc.ArgumentsErr.Raw != tc.Raw {
					t.Fatalf("raw text lost")
				}
			}
		}
	})
}

func sseBody(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		if strings.HasPrefix(e, ":") || strings.HasPrefix(e, "event:") {
			b.WriteString(e + "\n")
			continue
		}
		b.WriteString("data: " + e + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}
