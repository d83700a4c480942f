package otelsage_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/tools"
)

// The Jaeger end-to-end test: a real Jaeger v2 (built by `make jaeger`)
// receives the OTLP export of a session and its query API must return the
// expected tree.

const jaegerVersion = "v1.76.0"

// jaegerBinary finds the Jaeger binary: $SAGE_JAEGER_BIN, else the cache
// path that `make jaeger` and .ci/setup.d/30-jaeger.sh build into.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SAGE_JAEGER_BIN")
	if bin == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		bin = filepath.Join(cache, "sage", "jaeger-"+jaegerVersion)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		testenv.Missing(t, "Jaeger binary "+bin, "`make jaeger` (about 11 minutes the first time), or set SAGE_JAEGER_BIN")
	}
	return bin
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

const jaegerConfig = `# Jaeger v2 for the sage e2e test: memory storage, loopback only.
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none        # the default binds a Prometheus endpoint on :8888
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    enable_tracing: false  # v2 turns it on by default and would export to localhost:4317
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%[3]d
    grpc:
      endpoint: 127.0.0.1:%[4]d
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%[1]d
      http:
        endpoint: 127.0.0.1:%[2]d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

type jaeger struct {
	otlpGRPC string
	otlpHTTP string // http://127.0.0.1:port
	query    string // http://127.0.0.1:port
}

// startJaeger runs Jaeger on free loopback ports until the test ends.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	dir := t.TempDir()
	p := freePorts(t, 4)
	cfg := filepath.Join(dir, "jaeger.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, p[0], p[1], p[2], p[3]), 0o600))
	logPath := filepath.Join(dir, "jaeger.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)

	cmd := exec.Command(bin, "--config=file:"+cfg)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	for _, kv := range os.Environ() { // keep our own OTEL_* settings away from Jaeger
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	dumpLog := func() {
		b, _ := os.ReadFile(logPath)
		t.Logf("jaeger log:\n%s", b)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = logf.Close()
		if t.Failed() {
			dumpLog()
		}
	})

	j := &jaeger{otlpGRPC: fmt.Sprintf("127.0.0.1:%d", p[0]), otlpHTTP: fmt.Sprintf("http://127.0.0.1:%d", p[1]), query: fmt.Sprintf("http://127.0.0.1:%d", p[2])}
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			dumpLog()
			t.Fatalf("jaeger exited during start-up: %v", err)
		default:
		}
		if ready(j) {
			return j
		}
		if time.Now().After(deadline) {
			dumpLog()
			t.Fatal("jaeger did not become ready in 90s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ready(j *jaeger) bool {
	c, err := net.DialTimeout("tcp", j.otlpGRPC, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	resp, err := http.Get(j.query + "/api/services")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ---- a fake OpenAI-compatible model server ----

type fakeModel struct {
	calls atomic.Int32
}

type usageJSON struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// Per call: finish reason and usage.
var fakeTurns = []struct {
	finish                        string
	in, out, cached, reasoning    int64
	firstChunkDelay, restDuration time.Duration
}{
	{"tool_calls", 120, 30, 64, 0, 30 * time.Millisecond, 10 * time.Millisecond},
	{"stop", 200, 50, 0, 12, 20 * time.Millisecond, 10 * time.Millisecond},
}

// limitedModel is the model for which fakeModel answers 429.
const limitedModel = "fake-limited"

// statusError is a failed call's HTTP status, as SDK errors carry it.
type statusError struct {
	StatusCode int
	Body       string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.StatusCode, e.Body) }

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream {
		http.Error(w, `{"error":{"message":"stream required"}}`, http.StatusBadRequest)
		return
	}
	if req.Model == limitedModel {
		http.Error(w, `{"error":{"message":"rate limit reached","type":"rate_limit_error"}}`, http.StatusTooManyRequests)
		return
	}
	n := int(f.calls.Add(1)-1) % len(fakeTurns)
	turn := fakeTurns[n]
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	id := fmt.Sprintf("chatcmpl-%d", n+1)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	time.Sleep(turn.firstChunkDelay)
	send(map[string]any{"id": id, "model": req.Model + "-2026", "system_fingerprint": "fp_e2e", "service_tier": "default",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "Hel"}}}})
	time.Sleep(turn.restDuration)
	send(map[string]any{"id": id, "model": req.Model + "-2026", "system_fingerprint": "fp_e2e", "service_tier": "default",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "lo"}, "finish_reason": turn.finish}}})
	var u usageJSON
	u.PromptTokens, u.CompletionTokens = turn.in, turn.out
	u.PromptTokensDetails.CachedTokens = turn.cached
	u.CompletionTokensDetails.ReasoningTokens = turn.reasoning
	send(map[string]any{"id": id, "model": req.Model + "-2026", "choices": []any{}, "usage": u})
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// chat makes one streaming call and emits the llm events around it, as the
// llm client does.
func chat(ctx context.Context, m *observability.Manager, base, model string, msgs []observability.Message) (string, error) {
	u, _ := url.Parse(base)
	port, _ := strconv.Atoi(u.Port())
	ctx = m.LLMStart(ctx, observability.LLMRequest{
		Provider: "openai", Model: model, ModelType: observability.ModelStandard,
		ServerAddress: u.Hostname(), ServerPort: port, Stream: true, Messages: msgs,
	})
	resp, err := doChat(ctx, base, model, msgs)
	if err != nil {
		m.LLMError(ctx, err)
		return "", err
	}
	m.LLMEnd(ctx, resp)
	return resp.FinishReasons[0], nil
}

func doChat(ctx context.Context, base, model string, msgs []observability.Message) (observability.LLMResponse, error) {
	var out observability.LLMResponse
	body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, fmt.Errorf("chat: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return out, fmt.Errorf("chat: %w", &statusError{StatusCode: resp.StatusCode, Body: string(b)})
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	var last time.Time
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if out.TimeToFirstChunk == 0 {
			out.TimeToFirstChunk = time.Since(start)
		} else if line != "[DONE]" {
			out.ChunkIntervals = append(out.ChunkIntervals, time.Since(last))
		}
		last = time.Now()
		if line == "[DONE]" {
			break
		}
		var chunk struct {
			ID          string `json:"id"`
			Model       string `json:"model"`
			Fingerprint string `json:"system_fingerprint"`
			Tier        string `json:"service_tier"`
			Choices     []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usageJSON `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			return out, fmt.Errorf("chat: bad chunk: %w", err)
		}
		out.ID, out.Model = chunk.ID, chunk.Model
		if chunk.Fingerprint != "" {
			out.SystemFingerprint, out.ServiceTier = chunk.Fingerprint, chunk.Tier
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				out.FinishReasons = append(out.FinishReasons, c.FinishReason)
			}
		}
		if u := chunk.Usage; u != nil {
			out.Usage = observability.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
				CacheReadInputTokens: u.PromptTokensDetails.CachedTokens, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("chat: read stream: %w", err)
	}
	out.Messages = []observability.Message{{Role: "assistant", Content: content.String()}}
	return out, nil
}

// runTool runs a shell command as the tools manager does, with the tool
// events around it; the sandbox reports its exec under the tool run.
func runTool(ctx context.Context, m *observability.Manager, sb *sandbox.Sandbox, callID, script string) (string, error) {
	ctx = m.ToolStart(ctx, observability.ToolCall{Name: "shell", CallID: callID,
		Arguments: fmt.Sprintf(`{"command":%q}`, script)})
	res, err := sb.ExecuteCommand(ctx, script, sandbox.ExecOptions{})
	if err == nil && !res.Success {
		err = fmt.Errorf("tool shell: %w (stderr %q)", exitErr{fmt.Errorf("exit status %d", res.ExitCode)}, strings.TrimSpace(res.Stderr))
	}
	if err != nil {
		m.ToolError(ctx, err)
		return "", err
	}
	m.ToolEnd(ctx, observability.ToolResult{Result: res.Stdout})
	return res.Stdout, nil
}

// exitErr gives a command failure a low-cardinality error.type.
type exitErr struct{ error }

func (e exitErr) Unwrap() error   { return e.error }
func (exitErr) ErrorType() string { return "exit_code" }

// ---- Jaeger's query API ----

type jTrace struct {
	TraceID   string              `json:"traceID"`
	Spans     []jSpan             `json:"spans"`
	Processes map[string]jProcess `json:"processes"`
}

type jSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	Duration      int64  `json:"duration"` // µs
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags      []jTag                    `json:"tags"`
	Logs      []struct{ Fields []jTag } `json:"logs"`
	ProcessID string                    `json:"processID"`
}

type jTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jProcess struct {
	ServiceName string `json:"serviceName"`
}

func (s jSpan) tag(key string) (any, bool) {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return nil, false
}

func (s jSpan) str(key string) string {
	v, _ := s.tag(key)
	str, _ := v.(string)
	return str
}

func (s jSpan) num(key string) float64 {
	v, _ := s.tag(key)
	f, _ := v.(float64)
	return f
}

func (s jSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func queryTraces(j *jaeger, service string) ([]jTrace, error) {
	resp, err := http.Get(j.query + "/api/traces?limit=20&service=" + url.QueryEscape(service))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var body struct {
		Data []jTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	return body.Data, nil
}

// TestJaegerEndToEnd exports one user turn to a real Jaeger over OTLP gRPC
// and over OTLP HTTP/protobuf, and reads it back from the query API.
func TestJaegerEndToEnd(t *testing.T) {
	j := startJaeger(t)
	// Jaeger takes no metrics.
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	for _, tc := range []struct{ protocol, endpoint string }{
		{sageotel.ProtocolGRPC, j.otlpGRPC},
		{sageotel.ProtocolHTTP, j.otlpHTTP},
	} {
		t.Run(strings.ReplaceAll(tc.protocol, "/", "_"), func(t *testing.T) {
			jaegerTurn(t, j, tc.protocol, tc.endpoint)
		})
	}
}

func jaegerTurn(t *testing.T, j *jaeger, protocol, endpoint string) {
	model := httptest.NewServer(&fakeModel{})
	defer model.Close()

	service := fmt.Sprintf("sage-e2e-%d", time.Now().UnixNano())
	m := observability.New(observability.Options{})
	shutdown, err := sageotel.Setup(context.Background(), sageotel.SetupOptions{Endpoint: endpoint, Protocol: protocol, ServiceName: service, Manager: m, NoGlobal: true, ExportTimeout: 10 * time.Second})
	require.NoError(t, err)

	// One user turn: chain -> agent -> llm, tool ok, tool failing, the
	// shell tool's background command, llm.
	ctx := context.Background()
	// Sandbox spans come from the sandbox's own events, through the same
	// Manager as the llm and tool events.
	sb, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir(),
		RuntimeDir: t.TempDir(), SandboxID: "e2e-workspace", Observer: m})
	require.NoError(t, err)
	defer sb.Close(ctx)
	tm := tools.NewManager(sb, tools.Options{Observer: m})
	require.NoError(t, tm.Register(tools.Builtins(tools.BuiltinOptions{})...))
	sess := "e2e-session-1"
	cctx := m.ChainStart(ctx, observability.ChainInfo{SessionID: sess, Name: "e2e-turn",
		Inputs: []observability.Message{{Role: "user", Content: "list the files"}}})
	actx := m.AgentStart(cctx, observability.AgentInfo{Name: "researcher", Step: "act", Provider: "openai", Model: "fake-gpt"})
	msgs := []observability.Message{{Role: "user", Content: "list the files"}}
	finish, err := chat(actx, m, model.URL, "fake-gpt", msgs)
	require.NoError(t, err)
	require.Equal(t, "tool_calls", finish)
	out, err := runTool(actx, m, sb, "call-ok", "echo hello > f.txt && ls")
	require.NoError(t, err)
	require.Equal(t, "f.txt\n", out)
	_, err = runTool(actx, m, sb, "call-bad", "echo nope >&2; exit 3")
	require.Error(t, err)
	shellOut, err := tm.Do(actx, tools.Call{ID: "call-bg", Name: "execute_shell_command",
		Arguments: json.RawMessage(`{"command":"sleep 0.2; exit 5"}`)})
	require.NoError(t, err, shellOut)
	finish, err = chat(actx, m, model.URL, "fake-gpt", append(msgs, observability.Message{Role: "tool", Content: out, ToolCallID: "call-ok"}))
	require.NoError(t, err)
	require.Equal(t, "stop", finish)
	_, err = chat(actx, m, model.URL, limitedModel, msgs)
	require.Error(t, err)
	m.AgentEnd(actx, observability.AgentResult{})
	m.ChainEnd(cctx, observability.ChainResult{})

	// A plain sandbox command (sage exec): a chain of sandbox work only.
	ectx := m.ChainStart(ctx, observability.ChainInfo{SessionID: sess, Name: "sage exec"})
	esb, err := sandbox.New(ectx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir(),
		RuntimeDir: t.TempDir(), SandboxID: "e2e-exec", Observer: m})
	require.NoError(t, err)
	_, err = esb.ExecuteCommand(ectx, "true", sandbox.ExecOptions{})
	require.NoError(t, err)
	require.NoError(t, esb.Close(ectx))
	m.ChainEnd(ectx, observability.ChainResult{})

	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, shutdown(sctx), "flush to Jaeger")

	// Poll the query API until both traces are there.
	const want = 12 // chain, agent, 3 llm (one failing), 3 tool, 2 sandbox.exec, start_background, background
	var tr, cli jTrace
	deadline := time.Now().Add(60 * time.Second)
	for {
		traces, err := queryTraces(j, service)
		if err == nil && len(traces) == 2 {
			for _, x := range traces {
				if len(x.Spans) >= want {
					tr = x
				} else if len(x.Spans) == 4 {
					cli = x
				}
			}
			if tr.TraceID != "" && cli.TraceID != "" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger never returned the traces of %d and 4 spans: %d traces, err %v", want, len(traces), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Len(t, tr.Spans, want)
	for _, s := range tr.Spans {
		t.Logf("span %s parent=%s %q kind=%s tokens=%v/%v error=%v", s.SpanID, s.parent(), s.OperationName,
			s.str("span.kind"), s.num("gen_ai.usage.input_tokens"), s.num("gen_ai.usage.output_tokens"), s.str("error.type"))
	}

	byName := map[string][]jSpan{}
	byID := map[string]jSpan{}
	for _, s := range tr.Spans {
		byName[s.OperationName] = append(byName[s.OperationName], s)
		byID[s.SpanID] = s
		assert.Equal(t, service, tr.Processes[s.ProcessID].ServiceName)
	}
	one := func(name string) jSpan {
		require.Len(t, byName[name], 1, "span %q in %v", name, keys(byName))
		return byName[name][0]
	}

	// One agent under the chain: the chain is no workflow, a plain root.
	chain := one("e2e-turn")
	assert.Empty(t, chain.parent(), "the chain is the root")
	_, op := chain.tag("gen_ai.operation.name")
	assert.False(t, op, "a chain of one agent is no invoke_workflow")
	assert.Equal(t, sess, chain.str("sage.session.id"))

	agent := one("invoke_agent researcher")
	assert.Equal(t, chain.SpanID, agent.parent())
	assert.Equal(t, "researcher", agent.str("gen_ai.agent.name"))
	assert.Equal(t, "invoke_agent", agent.str("gen_ai.operation.name"))
	assert.Equal(t, "openai", agent.str("gen_ai.provider.name"))
	assert.Equal(t, "fake-gpt", agent.str("gen_ai.request.model"))
	assert.Equal(t, "fake-gpt-2026", agent.str("gen_ai.response.model"))
	var totIn, totOut, totCached float64
	for _, turn := range fakeTurns {
		totIn, totOut, totCached = totIn+float64(turn.in), totOut+float64(turn.out), totCached+float64(turn.cached)
	}
	assert.Equal(t, totIn, agent.num("gen_ai.usage.input_tokens"), "the agent's token total")
	assert.Equal(t, totOut, agent.num("gen_ai.usage.output_tokens"))
	assert.Equal(t, totCached, agent.num("gen_ai.usage.cache_read.input_tokens"))
	assert.Contains(t, agent.str("gen_ai.response.finish_reasons"), "stop", "the last call's finish reasons")

	for _, s := range tr.Spans {
		if strings.HasPrefix(s.OperationName, "sandbox.") || s.SpanID == chain.SpanID {
			continue
		}
		assert.Equal(t, sess, s.str("gen_ai.conversation.id"), s.OperationName)
	}

	llms := byName["chat fake-gpt"]
	require.Len(t, llms, 2)
	if llms[0].str("gen_ai.response.id") != "chatcmpl-1" {
		llms[0], llms[1] = llms[1], llms[0]
	}
	for i, s := range llms {
		turn := fakeTurns[i]
		assert.Equal(t, agent.SpanID, s.parent())
		assert.Equal(t, "client", s.str("span.kind"))
		assert.Equal(t, "chat", s.str("gen_ai.operation.name"))
		assert.Equal(t, "openai", s.str("gen_ai.provider.name"))
		assert.Equal(t, "fake-gpt", s.str("gen_ai.request.model"))
		assert.Equal(t, "fake-gpt-2026", s.str("gen_ai.response.model"))
		assert.Equal(t, "127.0.0.1", s.str("server.address"))
		assert.Contains(t, s.str("gen_ai.response.finish_reasons"), turn.finish)
		assert.EqualValues(t, turn.in, s.num("gen_ai.usage.input_tokens"))
		assert.EqualValues(t, turn.out, s.num("gen_ai.usage.output_tokens"))
		assert.EqualValues(t, turn.cached, s.num("gen_ai.usage.cache_read.input_tokens"))
		assert.EqualValues(t, turn.reasoning, s.num("gen_ai.usage.reasoning.output_tokens"))
		assert.Equal(t, "fp_e2e", s.str("openai.response.system_fingerprint"))
		assert.Equal(t, "default", s.str("openai.response.service_tier"))
		ttfc := s.num("gen_ai.response.time_to_first_chunk")
		assert.GreaterOrEqual(t, ttfc, turn.firstChunkDelay.Seconds(), "ttfc is at least the server's delay")
		_, hasSystem := s.tag("gen_ai.system")
		assert.False(t, hasSystem, "no deprecated gen_ai.system")
		_, hasInput := s.tag("gen_ai.input.messages")
		assert.False(t, hasInput, "content capture is off by default")
	}

	limited := one("chat " + limitedModel)
	assert.Equal(t, agent.SpanID, limited.parent())
	assert.Equal(t, "ERROR", limited.str("otel.status_code"))
	assert.Equal(t, "rate_limited", limited.str("error.type"), "the HTTP status, not a Go type name")
	assert.True(t, hasException(limited), "the failed call records its exception")
	_, hasUsage := limited.tag("gen_ai.usage.input_tokens")
	assert.False(t, hasUsage, "no usage is unknown usage, not zero")

	tools := byName["execute_tool shell"]
	require.Len(t, tools, 2)
	var okTool, badTool jSpan
	for _, s := range tools {
		assert.Equal(t, agent.SpanID, s.parent())
		assert.Equal(t, "execute_tool", s.str("gen_ai.operation.name"))
		assert.Equal(t, "shell", s.str("gen_ai.tool.name"))
		switch s.str("gen_ai.tool.call.id") {
		case "call-ok":
			okTool = s
		case "call-bad":
			badTool = s
		}
	}
	require.NotEmpty(t, okTool.SpanID)
	require.NotEmpty(t, badTool.SpanID)
	_, okHasErr := okTool.tag("error")
	assert.False(t, okHasErr)
	errTag, _ := badTool.tag("error")
	assert.Equal(t, true, errTag)
	assert.Equal(t, "ERROR", badTool.str("otel.status_code"))
	assert.Equal(t, "exit_code", badTool.str("error.type"))
	assert.Contains(t, badTool.str("otel.status_description"), "exit status 3")
	assert.True(t, hasException(badTool), "the error is recorded as an exception event")

	sbx := byName["sandbox.exec"]
	require.Len(t, sbx, 2)
	parents := map[string]bool{}
	for _, s := range sbx {
		parents[s.parent()] = true
		assert.Equal(t, "passthrough", s.str("sage.sandbox.mode"))
		assert.Equal(t, "none", s.str("sage.sandbox.isolation"))
		assert.Equal(t, "open", s.str("sage.sandbox.network"))
	}
	assert.Equal(t, map[string]bool{okTool.SpanID: true, badTool.SpanID: true}, parents,
		"each sandbox span is a child of its tool span")

	// The shell tool runs its command in the background: the command is a
	// span of its own under the tool, with its exit code and duration.
	shell := one("execute_tool execute_shell_command")
	bg := one("sandbox.background")
	assert.Equal(t, shell.SpanID, bg.parent())
	assert.Equal(t, shell.SpanID, one("sandbox.start_background").parent())
	assert.EqualValues(t, 5, bg.num("sage.sandbox.exit_code"))
	assert.GreaterOrEqual(t, bg.Duration, int64(200_000), "the command slept 0.2 s (µs)")

	// The sandbox command: a root of its own kind, no GenAI name.
	cliNames := map[string]jSpan{}
	for _, s := range cli.Spans {
		cliNames[s.OperationName] = s
	}
	root, ok := cliNames["sage exec"]
	require.True(t, ok, "spans: %v", cliNames)
	assert.Empty(t, root.parent())
	for _, name := range []string{"sandbox.acquire", "sandbox.exec", "sandbox.release"} {
		s, ok := cliNames[name]
		require.True(t, ok, "%s in %v", name, cliNames)
		assert.Equal(t, root.SpanID, s.parent(), name)
	}
	for _, s := range cli.Spans {
		for _, tag := range s.Tags {
			assert.False(t, strings.HasPrefix(tag.Key, "gen_ai."), "%s has %s", s.OperationName, tag.Key)
		}
	}
}

func hasException(s jSpan) bool {
	for _, l := range s.Logs {
		for _, f := range l.Fields {
			if f.Key == "event" && f.Value == "exception" {
				return true
			}
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
