package llm

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/llm/llmtest"
)

// toolCallStream is an SSE body with calls parallel tool calls, each name
// arriving once and its arguments in pieces, plus a usage chunk.
func toolCallStream(calls, pieces int) (string, int) {
	var ev []string
	ev = append(ev, llmtest.Chunk(0, `{"role":"assistant","content":null}`, ""))
	for i := range calls {
		ev = append(ev, llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(i, fmt.Sprintf("call_%d", i), "read_file", "")), ""))
		ev = append(ev, llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(i, "", "", `{"path":"`)), ""))
		for p := range pieces {
			ev = append(ev, llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(i, "", "", fmt.Sprintf("dir%d/", p))), ""))
		}
		ev = append(ev, llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(i, "", "", `file.go"}`)), ""))
	}
	ev = append(ev, llmtest.Chunk(0, `{}`, "tool_calls"), llmtest.UsageChunk(100, 200, 50, 10))
	return sseBody(ev...), len(ev)
}

func assembleBody(b *testing.B, body string) *Response {
	s := &Stream{sse: newSSEReader(strings.NewReader(body)), cancel: func() {}}
	for {
		_, err := s.fetch()
		if err == io.EOF {
			return s.asm.response()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamAssembly measures SSE parsing, chunk decoding and tool-call
// assembly over a stream of 32 parallel tool calls.
func BenchmarkStreamAssembly(b *testing.B) {
	body, chunks := toolCallStream(32, 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp := assembleBody(b, body)
		if len(resp.Choices[0].ToolCalls) != 32 {
			b.Fatal("lost tool calls")
		}
	}
	b.ReportMetric(float64(chunks), "chunks/op")
}

// BenchmarkPerChunk reports time and allocations per chunk; allocs/chunk is
// the figure to watch.
func BenchmarkPerChunk(b *testing.B) {
	body, chunks := toolCallStream(8, 50)
	allocs := testing.AllocsPerRun(5, func() { assembleBody(b, body) })
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		assembleBody(b, body)
	}
	b.ReportMetric(allocs/float64(chunks), "allocs/chunk")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(chunks), "ns/chunk")
}

// textStream is an SSE body of a reasoning model's answer: reasoning deltas
// then content deltas, with escapes, plus a usage chunk.
func textStream(n int) (string, int) {
	var ev []string
	ev = append(ev, llmtest.Chunk(0, `{"role":"assistant","content":""}`, ""))
	for i := range n {
		ev = append(ev, llmtest.Chunk(0, fmt.Sprintf(`{"reasoning_content":"step %d, so \"x\" "}`, i), ""))
	}
	for i := range n {
		ev = append(ev, llmtest.Chunk(0, fmt.Sprintf(`{"content":"word%d "}`, i), ""))
	}
	ev = append(ev, llmtest.Chunk(0, `{}`, "stop"), llmtest.UsageChunk(100, 200, 50, 10))
	return sseBody(ev...), len(ev)
}

// BenchmarkTextStreamAssembly measures the same path over text and
// reasoning deltas, where "content" is decoded on every chunk.
func BenchmarkTextStreamAssembly(b *testing.B) {
	body, chunks := textStream(300)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp := assembleBody(b, body)
		if len(resp.Content()) == 0 {
			b.Fatal("lost content")
		}
	}
	b.ReportMetric(float64(chunks), "chunks/op")
}
