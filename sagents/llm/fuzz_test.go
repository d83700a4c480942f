package llm

import (
	"encoding/json"
	"errors"
	"reflect"
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
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":[{\"type\":\"thinking\",\"thinking\":[{\"type\":\"text\",\"text\":\"t\"}]},{\"type\":\"text\",\"text\":\"x\"}],\"reasoning\":\"r\",\"reasoning_content\":\"r\"}}]}\n\n")
	f.Add("data: {\"choices\":[{\"delta\":{\"reasoning_details\":[{\"type\":\"reasoning.text\",\"text\":\"d\"}],\"tool_calls\":[{\"extra_content\":{\"k\":1},\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]}}],\"error\":{\"code\":400,\"message\":\"m\"},\"usage\":{\"prompt_tokens\":1}}\n\n")
	f.Add("error: {\"code\":400,\"message\":\"context size\"}\n\ndata: [DONE]\n\n")
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

// FuzzToolCallDelta checks the hand-written tool-call decoder against
// encoding/json: on any JSON object it must agree with a plain map decode on
// index, id, type, function name and arguments, and keep every other
// non-null member, raw, in Extra. It must never panic on any input.
func FuzzToolCallDelta(f *testing.F) {
	f.Add(`{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}`)
	f.Add(`{"extra_content":{"google":{"thought_signature":"c2ln"}},"function":{"arguments":"{}","name":"read"},"id":"x","type":"function"}`)
	f.Add(`{"function":{"arguments":{"a":[1,"}"]}},"index":null,"id":null,"x":null}`)
	f.Add(`{"\u0069d":"esc\"aped\u00e9","function":{"name":"\ud83d\ude00"}, "index" : 3 , "z":[{"}":"]"}]}`)
	f.Add(`{"function":{"name":"a"},"function":{"arguments":"b"},"id":"1","id":"2"}`)
	f.Add(`{"index":1.5}`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, in string) {
		var got ToolCallDelta
		gotErr := got.UnmarshalJSON([]byte(in)) // direct: invalid input too
		var viaJSON ToolCallDelta
		jsonErr := json.Unmarshal([]byte(in), &viaJSON)
		var ref map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &ref) != nil || ref == nil {
			if jsonErr == nil && !isNullJSON(in) {
				t.Fatalf("decoded a non-object: %q", in)
			}
			return
		}
		if (gotErr == nil) != (jsonErr == nil) {
			t.Fatalf("direct and json.Unmarshal disagree: %v / %v", gotErr, jsonErr)
		}
		want, ok := referenceToolCall(ref)
		if !ok {
			if jsonErr == nil {
				t.Fatalf("accepted %q, whose known fields have the wrong types", in)
			}
			return
		}
		if jsonErr != nil {
			t.Fatalf("rejected %q: %v", in, jsonErr)
		}
		if viaJSON.ID != want.ID || viaJSON.Type != want.Type || viaJSON.Function != want.Function {
			t.Fatalf("got %+v, want %+v", viaJSON, want)
		}
		if (viaJSON.Index == nil) != (want.Index == nil) || viaJSON.Index != nil && *viaJSON.Index != *want.Index {
			t.Fatalf("index %v, want %v", viaJSON.Index, want.Index)
		}
		if len(viaJSON.Extra) != len(want.Extra) {
			t.Fatalf("extra %v, want %v", viaJSON.Extra, want.Extra)
		}
		for k, v := range want.Extra {
			if !jsonEqual(viaJSON.Extra[k], v) {
				t.Fatalf("extra %q = %s, want %s", k, viaJSON.Extra[k], v)
			}
		}
	})
}

func isNullJSON(s string) bool { return strings.TrimSpace(s) == "null" }

// referenceToolCall decodes a tool-call object with encoding/json alone.
func referenceToolCall(m map[string]json.RawMessage) (ToolCallDelta, bool) {
	var d ToolCallDelta
	str := func(raw json.RawMessage, dst *string) bool {
		return raw == nil || json.Unmarshal(raw, dst) == nil
	}
	for k, v := range m {
		switch k {
		case "index":
			if !isNull(v) {
				var n int
				if json.Unmarshal(v, &n) != nil {
					return d, false
				}
				d.Index = &n
			}
		case "id":
			if !str(v, &d.ID) {
				return d, false
			}
		case "type":
			if !str(v, &d.Type) {
				return d, false
			}
		case "function":
			if isNull(v) {
				continue
			}
			var fn map[string]json.RawMessage
			if json.Unmarshal(v, &fn) != nil {
				return d, false
			}
			if !str(fn["name"], &d.Function.Name) {
				return d, false
			}
			if a := fn["arguments"]; len(a) > 0 && (a[0] == '{' || a[0] == '[') {
				d.Function.Arguments = string(a) // kept as its JSON text
			} else if !str(a, &d.Function.Arguments) {
				return d, false
			}
		default:
			if !isNull(v) {
				if d.Extra == nil {
					d.Extra = map[string]json.RawMessage{}
				}
				d.Extra[k] = v
			}
		}
	}
	return d, true
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// FuzzContentField feeds any JSON value as a delta's "content": a string must
// decode exactly as encoding/json decodes it, parts must never yield more
// text than they hold, and nothing may panic.
func FuzzContentField(f *testing.F) {
	f.Add(`"plain"`)
	f.Add(`"esc\n\u00e9\ud83d\ude00\""`)
	f.Add(`null`)
	f.Add(`[{"type":"thinking","thinking":[{"type":"text","text":"t"}]},{"type":"text","text":"x"}]`)
	f.Add(`[{"type":"thinking","thinking":"s"},{"type":"refusal","refusal":"no"},{"type":"image_url","image_url":{"url":"u"}}]`)
	f.Add(`{"type":"text","text":"single"}`)
	f.Add(`[{"type":"text","text":7}]`)
	f.Add(`12`)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		data := []byte(`{"choices":[{"index":0,"delta":{"content":` + in + `}}]}`)
		c, err := decodeChunk(data)
		if err != nil {
			var m *malformedChunk
			if !errors.As(err, &m) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		d := c.Choices[0].Delta
		var s string
		if json.Unmarshal([]byte(in), &s) == nil {
			if d.Content != s || d.ReasoningContent != "" {
				t.Fatalf("string content %q decoded as %q", s, d.Content)
			}
			return
		}
		if n := len(d.Content) + len(d.ReasoningContent) + len(d.Refusal); n > len(in)*3 {
			t.Fatalf("%d bytes of text from %d bytes of input", n, len(in))
		}
	})
}

// FuzzReasoningDetails: reasoning_details of any shape never fails the
// chunk, never panics, and yields no more text than it holds.
func FuzzReasoningDetails(f *testing.F) {
	f.Add(`[{"type":"reasoning.text","text":"a","index":0},{"type":"reasoning.encrypted","data":"eA=="}]`)
	f.Add(`[{"type":"reasoning.summary","summary":"s"}]`)
	f.Add(`{"type":"reasoning.text"}`)
	f.Add(`[1,"x",null]`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		data := []byte(`{"choices":[{"index":0,"delta":{"reasoning_details":` + in + `}}]}`)
		c, err := decodeChunk(data)
		if err != nil {
			t.Fatalf("reasoning_details %q failed the chunk: %v", in, err)
		}
		if n := len(c.Choices[0].Delta.ReasoningContent); n > len(in)*3 {
			t.Fatalf("%d bytes of reasoning from %d bytes", n, len(in))
		}
	})
}

// FuzzErrorBody: any error body or in-band error event yields a bounded,
// classified *Error; an OpenAI envelope's message and string code come
// through unchanged.
func FuzzErrorBody(f *testing.F) {
	f.Add(`{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"c"}}`)
	f.Add(`{"error":{"message":"m","code":"tool_use_failed","status_code":400}}`)
	f.Add(`{"object":"error","message":"context length","type":"BadRequestError","param":null,"code":400}`)
	f.Add(`{"code":500,"message":"x","type":"server_error"}`)
	f.Add(`{"error":"plain"}`)
	f.Add(`{"detail":[{"loc":["body"],"msg":"bad"}]}`)
	f.Add(`{"message":["a","b"]}`)
	f.Add(`"just text"`)
	f.Add(`not json`)
	f.Add(`{"error":{"message":"m","code":null}}`)
	f.Fuzz(func(t *testing.T, in string) {
		err := streamEventError([]byte(in))
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrStreamEvent) {
			t.Fatalf("untyped in-band error %T", err)
		}
		if len(e.Message) > maxMessage+3 {
			t.Fatalf("message of %d bytes", len(e.Message))
		}
		if e.StatusCode != 0 && (e.StatusCode < 400 || e.StatusCode > 599) {
			t.Fatalf("status %d", e.StatusCode)
		}
		if e.Kind.String() == "" {
			t.Fatalf("unnamed kind %d", e.Kind)
		}
		var env struct {
			Error *struct {
				Message *string `json:"message"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(in), &env) == nil && env.Error != nil && env.Error.Message != nil &&
			*env.Error.Message != "" && len(*env.Error.Message) <= maxMessage {
			if e.Message != *env.Error.Message {
				t.Fatalf("message %q, want %q", e.Message, *env.Error.Message)
			}
			if env.Error.Code != nil && e.Code != *env.Error.Code {
				t.Fatalf("code %q, want %q", e.Code, *env.Error.Code)
			}
		}
	})
}
