// Package replay is a scripted model: an in-process OpenAI-compatible chat
// completions server on 127.0.0.1 that plays one fixed, readable plan
// whatever the task says. It exists so that the whole runtime (llm client,
// agent loop, tools, sandbox, traces) can be tried on a machine without a
// model. Everything it says is labelled as a replay.
//
// The plan, one step per model call, decided from the conversation it is
// sent (so it is stateless and safe for concurrent sessions):
//
//  1. write fib.py with file_write;
//  2. run it with execute_shell_command, redirecting its output to
//     fib_output.txt;
//  3. read fib_output.txt with file_read and list the workspace with
//     list_dir, two tool calls at once;
//  4. answer, quoting the output that file_read returned.
//
// If a tool call fails, the next reply reports the failure and stops.
package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Model is the model name the replay server reports.
const Model = "sage-replay"

// Label starts every text the replay model writes.
const Label = "[replay]"

// Script is the Python program the plan writes.
const Script = `# Written by the sage replay model.
def fib(n):
    a, b = 0, 1
    out = []
    for _ in range(n):
        out.append(a)
        a, b = b, a + b
    return out

nums = fib(15)
print("first 15 Fibonacci numbers:", " ".join(map(str, nums)))
print("sum:", sum(nums))
`

// Server is a running replay model.
type Server struct {
	// URL is the base URL, ending in /v1.
	URL string

	srv *http.Server
	ln  net.Listener
	// ChunkDelay is the pause between streamed chunks (default 15ms), so
	// that streaming is visible.
	ChunkDelay time.Duration
}

// Start serves the replay model on a free port of 127.0.0.1.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/v1", ln: ln, ChunkDelay: 15 * time.Millisecond}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"sage"}]}`, Model)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

type message struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	Name       string `json:"name"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
}

func (m message) text() string {
	if s, ok := m.Content.(string); ok {
		return s
	}
	return ""
}

type request struct {
	Messages      []message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// call is a tool call of a reply.
type call struct {
	ID, Name string
	Args     any
}

// reply is one step of the plan.
type reply struct {
	Text  string
	Calls []call
}

// planCalls are the ids of each step's tool calls, in plan order.
var planCalls = [][]string{{"call_write"}, {"call_run"}, {"call_read", "call_list"}}

// next returns the reply to a conversation: the step of the plan that
// follows the last one it contains. The plan's own call ids say which step
// that is, as a framework may split one reply's tool calls over several
// assistant messages (langchaingo's agents do); a conversation without them
// is counted in assistant messages.
func next(msgs []message) reply {
	step, assistants := 0, 0
	var lastTools []message
	results := map[string]message{} // by tool_call_id
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			assistants++
			lastTools = nil
			for _, c := range m.ToolCalls {
				for i, ids := range planCalls {
					if slices.Contains(ids, c.ID) {
						step = max(step, i+1)
					}
				}
			}
		case "tool":
			lastTools = append(lastTools, m)
			results[m.ToolCallID] = m
		}
	}
	if step == 0 {
		step = assistants
	} else {
		// The results of the step reached, wherever they are.
		lastTools = nil
		for _, id := range planCalls[step-1] {
			if r, ok := results[id]; ok {
				lastTools = append(lastTools, r)
			}
		}
	}
	for _, t := range lastTools {
		if strings.HasPrefix(t.text(), `{"success":false`) {
			return reply{Text: fmt.Sprintf("%s The %s call failed, so the scripted plan stops here:\n%s", Label, t.Name, t.text())}
		}
	}
	switch step {
	case 0:
		return reply{
			Text:  Label + " This is a scripted replay, not a language model. Plan: write a Python script, run it, read its output, answer.\nFirst, write fib.py.",
			Calls: []call{{"call_write", "file_write", map[string]any{"path": "fib.py", "content": Script}}},
		}
	case 1:
		return reply{
			Text:  Label + " Now run it, saving what it prints.",
			Calls: []call{{"call_run", "execute_shell_command", map[string]any{"command": "python3 fib.py > fib_output.txt && echo exit status $?", "block_until_ms": 20000}}},
		}
	case 2:
		return reply{
			Text: Label + " Read the output and look at the workspace, both at once.",
			Calls: []call{
				{"call_read", "file_read", map[string]any{"path": "fib_output.txt"}},
				{"call_list", "list_dir", map[string]any{"path": ".", "depth": 1}},
			},
		}
	}
	output := "(no output found)"
	for _, t := range lastTools {
		if t.ToolCallID == "call_read" {
			output = t.text()
			if _, rest, ok := strings.Cut(output, "\n"); ok {
				output = rest // drop file_read's header line
			}
		}
	}
	return reply{Text: fmt.Sprintf("%s Done. I wrote fib.py, ran it with python3 in the sandbox and read its output file fib_output.txt:\n\n%s\nBoth files are in the workspace. (This answer was replayed from a fixed script; point --model at a real model to do real work.)",
		Label, strings.TrimRight(output, "\n"))}
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":null}}`, err.Error())
		return
	}
	rep := next(req.Messages)
	in := 0
	for _, m := range req.Messages {
		in += len(m.text())
	}
	usage := map[string]int{"prompt_tokens": in/4 + 1, "completion_tokens": len(rep.Text)/4 + 1}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	if !req.Stream {
		writeJSON(w, rep, usage)
		return
	}
	s.writeSSE(r.Context(), w, rep, usage, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
}

func finish(rep reply) string {
	if len(rep.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func argsJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

func writeJSON(w http.ResponseWriter, rep reply, usage map[string]int) {
	msg := map[string]any{"role": "assistant", "content": rep.Text}
	var tcs []map[string]any
	for _, c := range rep.Calls {
		tcs = append(tcs, map[string]any{"id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": argsJSON(c.Args)}})
	}
	if tcs != nil {
		msg["tool_calls"] = tcs
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "replay-1", "object": "chat.completion", "created": time.Now().Unix(), "model": Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish(rep)}},
		"usage":   usage,
	})
}

func (s *Server) writeSSE(ctx context.Context, w http.ResponseWriter, rep reply, usage map[string]int, withUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
		if s.ChunkDelay <= 0 {
			return ctx.Err() == nil
		}
		t := time.NewTimer(s.ChunkDelay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	chunk := func(delta map[string]any, fin any) map[string]any {
		return map[string]any{"id": "replay-1", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}}
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	for _, piece := range pieces(rep.Text) {
		if !send(chunk(map[string]any{"content": piece}, nil)) {
			return
		}
	}
	for i, c := range rep.Calls {
		args := argsJSON(c.Args)
		half := len(args) / 2
		first := map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args[:half]}}
		rest := map[string]any{"index": i, "function": map[string]any{"arguments": args[half:]}}
		if !send(chunk(map[string]any{"tool_calls": []any{first}}, nil)) || !send(chunk(map[string]any{"tool_calls": []any{rest}}, nil)) {
			return
		}
	}
	if !send(chunk(map[string]any{}, finish(rep))) {
		return
	}
	if withUsage {
		send(map[string]any{"id": "replay-1", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": Model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// pieces splits text into word-sized chunks, as a model streams.
func pieces(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\n' {
			out = append(out, s[start:i])
			start = i
		}
	}
	return append(out, s[start:])
}
