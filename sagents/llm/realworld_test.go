package llm

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/llm/llmtest"
)

// The recorded provider responses live outside the module, in
// ../shared/realworld/llm relative to the module root (CI has them).
// SAGE_REALWORLD_LLM overrides the location.
func realworldDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("SAGE_REALWORLD_LLM"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "expected.json")); err != nil {
			t.Fatalf("SAGE_REALWORLD_LLM=%s: %v", d, err)
		}
		return d
	}
	return filepath.Dir(testenv.Shared(t, "realworld/llm/expected.json"))
}

// rwExpect is one row of expected.json: what the provider meant.
type rwExpect struct {
	Content   []string `json:"content"`
	Finish    []string `json:"finish"`
	Reasoning string   `json:"reasoning"`
	Refusal   string   `json:"refusal"`
	Calls     []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Args string `json:"args"`
	} `json:"calls"`
	Usage Usage `json:"usage"`
	Error *struct {
		Contains string `json:"contains"`
		Kind     string `json:"kind"`
		Partial  bool   `json:"partial"`
		Code     string `json:"code"`
		Requests int    `json:"requests"`
	} `json:"error"`
}

// expectedRows reads dir's expected.json.
func expectedRows(t *testing.T, dir string) map[string]rwExpect {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]rwExpect
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestRealWorldStreams replays every recorded SSE transcript through
// ChatStream and checks the assembled meaning against expected.json.
func TestRealWorldStreams(t *testing.T) {
	dir := realworldDir(t)
	want := expectedRows(t, dir)
	files, err := filepath.Glob(filepath.Join(dir, "*.sse"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no transcripts in %s", dir)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sse")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			exp, ok := want[name]
			if !ok {
				t.Fatalf("no row in expected.json for %s", name)
			}
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			replayStream(t, string(body), exp)
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("expected.json row %s has no transcript", name)
		}
	}
}

func replayStream(t *testing.T, body string, exp rwExpect) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Raw: body} })
	c, _ := newClient(t, srv)
	var resp *Response
	s, err := c.ChatStream(ctxT(t), req("x"))
	if err == nil {
		resp, err = s.Collect()
	}
	if exp.Error == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
	} else {
		if err == nil {
			t.Fatalf("want a %s error containing %q, got none", exp.Error.Kind, exp.Error.Contains)
		}
		var pe *PartialStreamError
		if gotPartial := errors.As(err, &pe); gotPartial != exp.Error.Partial {
			t.Errorf("partial output kept = %v, want %v (%v)", gotPartial, exp.Error.Partial, err)
		}
		if pe != nil {
			resp = pe.Partial
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error is not an *llm.Error: %T %v", err, err)
		}
		if e.Kind.String() != exp.Error.Kind {
			t.Errorf("kind = %q, want %q (%v)", e.Kind, exp.Error.Kind, err)
		}
		if !strings.Contains(e.Message, exp.Error.Contains) {
			t.Errorf("message = %q, want it to contain %q", e.Message, exp.Error.Contains)
		}
		if exp.Error.Code != "" && e.Code != exp.Error.Code {
			t.Errorf("code = %q, want %q", e.Code, exp.Error.Code)
		}
		if n := len(srv.Requests()); exp.Error.Requests > 0 && n != exp.Error.Requests {
			t.Errorf("requests sent = %d, want %d", n, exp.Error.Requests)
		}
	}
	checkMeaning(t, resp, exp)
	if strings.Contains(body, `"extra_content"`) && resp != nil {
		for _, ch := range resp.Choices {
			for _, tc := range ch.ToolCalls {
				if len(tc.Extra["extra_content"]) == 0 {
					t.Errorf("tool call %s lost its extra_content", tc.ID)
				}
			}
		}
	}
}

func checkMeaning(t *testing.T, resp *Response, exp rwExpect) {
	t.Helper()
	if resp == nil {
		resp = &Response{}
	}
	var content, finish []string
	for _, ch := range resp.Choices {
		content = append(content, ch.Message.Content)
		finish = append(finish, string(ch.FinishReason))
	}
	if !slices.Equal(content, exp.Content) {
		t.Errorf("content = %q\nwant      %q", content, exp.Content)
	}
	if !slices.Equal(finish, exp.Finish) {
		t.Errorf("finish reasons = %q, want %q", finish, exp.Finish)
	}
	var reasoning, refusal string
	var calls []ToolCall
	if len(resp.Choices) > 0 {
		m := resp.Choices[0].Message
		reasoning, refusal, calls = m.ReasoningContent, m.Refusal, resp.Choices[0].ToolCalls
	}
	if reasoning != exp.Reasoning {
		t.Errorf("reasoning = %q\nwant        %q", reasoning, exp.Reasoning)
	}
	if refusal != exp.Refusal {
		t.Errorf("refusal = %q, want %q", refusal, exp.Refusal)
	}
	if len(calls) != len(exp.Calls) {
		t.Errorf("%d tool calls, want %d: %+v", len(calls), len(exp.Calls), calls)
	} else {
		for i, w := range exp.Calls {
			g := calls[i]
			if g.ID != w.ID || g.Name != w.Name || g.Raw != w.Args || g.ArgumentsErr != nil {
				t.Errorf("tool call %d = {%s %s %s err=%v}, want {%s %s %s}", i, g.ID, g.Name, g.Raw, g.ArgumentsErr, w.ID, w.Name, w.Args)
			}
		}
	}
	if resp.Usage != exp.Usage {
		t.Errorf("usage = %+v, want %+v", resp.Usage, exp.Usage)
	}
}

// rwBody is one entry of json/fixtures.json.
type rwBody struct {
	Name    string            `json:"name"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// rwBodyMeaning is what each recorded non-streaming body means. For the two
// successful bodies the meaning is read from the body itself (see
// plainReading); for errors it is the classification a caller acts on.
var rwBodyMeaning = map[string]struct {
	kind       Kind
	code       string
	param      string
	retryAfter time.Duration
	requests   int // 0: not checked
}{
	"vllm-qwen3-8b-toolcalls-both-reasoning-fields": {},
	"vllm-0.22-reasoning-only":                      {},
	"openai-429-rate-limit":                         {kind: KindRateLimited, code: "rate_limit_exceeded", retryAfter: 20 * time.Second, requests: 4},
	"openai-429-insufficient-quota":                 {kind: KindQuotaExceeded, code: "insufficient_quota", requests: 1},
	"openai-400-temperature-unsupported-value":      {kind: KindUnsupportedParameter, code: "unsupported_value", param: "temperature"},
	"openai-400-max-tokens-unsupported-parameter":   {kind: KindUnsupportedParameter, code: "unsupported_parameter", param: "max_tokens"},
	"openai-400-context-length-exceeded":            {kind: KindContextWindow, code: "context_length_exceeded", requests: 1},
	"openai-401-invalid-api-key":                    {kind: KindAuth, code: "invalid_api_key", requests: 1},
	"openai-500-server-error":                       {kind: KindServer, requests: 4},
	"vllm-400-context-legacy-toplevel":              {kind: KindContextWindow, code: "400", requests: 1},
	"ollama-404-model-not-found":                    {kind: KindNotFound, requests: 1},
	"ollama-500-runner-terminated":                  {kind: KindServer, requests: 4},
	"llamacpp-503-loading-model":                    {kind: KindServer, code: "503", requests: 4},
	"llamacpp-400-exceed-context-size":              {kind: KindContextWindow, code: "400", requests: 1},
}

// TestRealWorldBodies replays every recorded non-streaming body through Chat.
func TestRealWorldBodies(t *testing.T) {
	dir := realworldDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "json", "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bodies []rwBody
	if err := json.Unmarshal(raw, &bodies); err != nil {
		t.Fatal(err)
	}
	if len(bodies) == 0 {
		t.Fatal("no bodies in fixtures.json")
	}
	for _, b := range bodies {
		t.Run(b.Name, func(t *testing.T) {
			want, ok := rwBodyMeaning[b.Name]
			if !ok {
				t.Fatalf("no meaning recorded in this test for body %s", b.Name)
			}
			srv := llmtest.New(t)
			srv.SetFallback(func(llmtest.Request) llmtest.Reply {
				return llmtest.Reply{Status: b.Status, Header: b.Headers, Body: b.Body}
			})
			c, _ := newClient(t, srv)
			resp, err := c.Chat(ctxT(t), req("x"))
			if b.Status == 200 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				checkMeaning(t, resp, plainReading(t, b.Body))
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want an *llm.Error, got %T %v", err, err)
			}
			if e.Kind != want.kind {
				t.Errorf("kind = %q, want %q (%v)", e.Kind, want.kind, err)
			}
			if e.StatusCode != b.Status {
				t.Errorf("status = %d, want %d", e.StatusCode, b.Status)
			}
			if e.Code != want.code {
				t.Errorf("code = %q, want %q", e.Code, want.code)
			}
			if e.Param != want.param && want.param != "" {
				t.Errorf("param = %q, want %q", e.Param, want.param)
			}
			if e.RetryAfter != want.retryAfter {
				t.Errorf("retry after = %v, want %v", e.RetryAfter, want.retryAfter)
			}
			if msg := errorMessageOf(t, b.Body); e.Message != msg {
				t.Errorf("message = %q\nwant      %q", e.Message, msg)
			}
			if n := len(srv.Requests()); want.requests > 0 && n != want.requests {
				t.Errorf("requests sent = %d, want %d", n, want.requests)
			}
		})
	}
}

// plainReading reads a chat.completion body the way a person would: each
// choice's content, reasoning from reasoning_content or reasoning (a
// mirrored value once), tool calls and usage.
func plainReading(t *testing.T, body string) rwExpect {
	t.Helper()
	var w struct {
		Choices []struct {
			Message struct {
				Content          *string `json:"content"`
				Refusal          *string `json:"refusal"`
				Reasoning        string  `json:"reasoning"`
				ReasoningContent string  `json:"reasoning_content"`
				ToolCalls        []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &w); err != nil {
		t.Fatal(err)
	}
	var exp rwExpect
	for i, ch := range w.Choices {
		m := ch.Message
		exp.Content = append(exp.Content, deref(m.Content))
		exp.Finish = append(exp.Finish, ch.FinishReason)
		if i > 0 {
			continue
		}
		exp.Refusal = deref(m.Refusal)
		exp.Reasoning = m.ReasoningContent
		if exp.Reasoning == "" {
			exp.Reasoning = m.Reasoning
		}
		for _, tc := range m.ToolCalls {
			exp.Calls = append(exp.Calls, struct {
				ID   string `json:"id"`
				Name string `json:"name"`
				Args string `json:"args"`
			}{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
	}
	exp.Usage = Usage{Input: w.Usage.Prompt, Output: w.Usage.Completion, Total: w.Usage.Total}
	return exp
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// errorMessageOf is the message field of an error body, enveloped in
// {"error": ...} or not.
func errorMessageOf(t *testing.T, body string) string {
	t.Helper()
	var w struct {
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &w); err != nil {
		t.Fatal(err)
	}
	if w.Error != nil {
		return w.Error.Message
	}
	return w.Message
}

// TestRealWorldGroqUsageWithoutStreamOptions: Groq's recorded streams carry
// their usage twice, in "usage" and in "x_groq"."usage"; without
// stream_options Groq sends only the latter. Each recording with x_groq
// usage, its "usage" fields removed, must still give the recorded usage.
func TestRealWorldGroqUsageWithoutStreamOptions(t *testing.T) {
	dir := realworldDir(t)
	want := expectedRows(t, dir)
	files, _ := filepath.Glob(filepath.Join(dir, "groq-*.sse"))
	tried := 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), `"x_groq":{`) || !strings.Contains(string(body), `"completion_tokens"`) {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".sse")
		exp := want[name]
		if exp.Error != nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			tried++
			stripped := stripTopUsage(t, string(body))
			srv := llmtest.New(t)
			srv.SetFallback(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Raw: stripped} })
			c, _ := newClient(t, srv)
			s, err := c.ChatStream(ctxT(t), req("x"))
			require.NoError(t, err)
			resp, err := s.Collect()
			require.NoError(t, err)
			assert.Equal(t, exp.Usage.Input, resp.Usage.Input)
			assert.Equal(t, exp.Usage.Output, resp.Usage.Output)
			assert.Equal(t, exp.Usage.Total, resp.Usage.Total)
		})
	}
	if tried == 0 {
		t.Fatalf("no Groq recording with x_groq usage in %s", dir)
	}
}

// stripTopUsage removes the top-level "usage" of every data line.
func stripTopUsage(t *testing.T, body string) string {
	t.Helper()
	var out strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok || data == "[DONE]" {
			out.WriteString(line)
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			out.WriteString(line)
			continue
		}
		delete(m, "usage")
		b, err := json.Marshal(m)
		require.NoError(t, err)
		out.WriteString("data: " + string(b) + "\n")
	}
	return out.String()
}
