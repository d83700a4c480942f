package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// otlpHTTP is an OTLP/HTTP receiver on 127.0.0.1 that keeps the span and
// metric names it decodes.
type otlpHTTP struct {
	mu      sync.Mutex
	spans   map[string]int
	metrics map[string]map[string]bool // metric -> gen_ai.operation.name values
}

func (o *otlpHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch r.URL.Path {
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					o.spans[s.Name]++
				}
			}
		}
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	case "/v1/metrics":
		var req colmetric.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if o.metrics[m.Name] == nil {
						o.metrics[m.Name] = map[string]bool{}
					}
					for _, dp := range m.GetHistogram().GetDataPoints() {
						for _, kv := range dp.Attributes {
							if kv.Key == "gen_ai.operation.name" {
								o.metrics[m.Name][kv.GetValue().GetStringValue()] = true
							}
						}
					}
				}
			}
		}
		out, _ := proto.Marshal(&colmetric.ExportMetricsServiceResponse{})
		_, _ = w.Write(out)
	default:
		http.NotFound(w, r)
	}
}

// serveOTLP serves an OTLP/HTTP receiver on loopback for the test and
// returns it with its endpoint (http://127.0.0.1:port).
func serveOTLP(t *testing.T) (*otlpHTTP, string) {
	t.Helper()
	rcv := &otlpHTTP{spans: map[string]int{}, metrics: map[string]map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return rcv, "http://" + ln.Addr().String()
}

// startOTLPReceiver is serveOTLP with the environment's OTLP exporter
// pointed at the receiver (and only at it: every more specific OTEL_
// variable is cleared) for the rest of the test.
func startOTLPReceiver(t *testing.T) *otlpHTTP {
	t.Helper()
	rcv, endpoint := serveOTLP(t)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
		"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	return rcv
}

// TestAgentExportsOTLP: with an OTLP endpoint in the environment, sage agent
// exports its spans and its metrics, here over HTTP/protobuf.
func TestAgentExportsOTLP(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("SAGE_HOME", sandboxtest.TempDir(t))
	var out, errb bytes.Buffer
	code := runWithin(t, 2*time.Minute, &cliEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &errb},
		[]string{"agent", "--model", "scripted", "--trace=false", "--mode", "passthrough",
			"--workspace", sandboxtest.TempDir(t), "--session", "otlp"}...)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.spans["invoke_agent sage"] != 1 || rcv.spans["chat sage-replay"] == 0 || rcv.spans["execute_tool file_write"] == 0 {
		t.Errorf("spans received: %v", rcv.spans)
	}
	if rcv.spans["invoke_workflow sage agent"] != 0 || rcv.spans["invoke_workflow sage"] != 0 || rcv.spans["sage agent"] != 1 {
		t.Errorf("a single agent run is reported as a workflow, or not under its command: %v", rcv.spans)
	}
	ops := rcv.metrics["gen_ai.client.operation.duration"]
	for _, op := range []string{"chat", "execute_tool", "invoke_agent"} {
		if !ops[op] {
			t.Errorf("no gen_ai.client.operation.duration of %s; metrics received: %v", op, rcv.metrics)
		}
	}
}

// TestExecIsNoGenAIOperation: sage exec exports a span of its own kind,
// "sage exec", holding the sandbox's spans, and no GenAI name or metric
// (the old command was an invoke_workflow span counted in
// gen_ai.client.operation.duration).
func TestExecIsNoGenAIOperation(t *testing.T) {
	rcv := startOTLPReceiver(t)
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--mode", "passthrough", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.spans["sage exec"] != 1 || rcv.spans["sandbox.exec"] != 1 || rcv.spans["invoke_workflow sage exec"] != 0 {
		t.Errorf("spans received: %v", rcv.spans)
	}
	for name := range rcv.metrics {
		if strings.HasPrefix(name, "gen_ai.") {
			t.Errorf("a sandbox command is on %s: %v", name, rcv.metrics)
		}
	}
}

// TestExecTracesOnlyEndpoint: the traces-only set-up Langfuse and Datadog
// document (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, http/protobuf) exports the
// traces and warns of nothing: no metrics go to localhost:4317 (the old
// command warned and waited for them at every exit; the metrics' TLS
// setting makes that old failure certain whatever listens there).
func TestExecTracesOnlyEndpoint(t *testing.T) {
	rcv, endpoint := serveOTLP(t)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_TRACES_EXPORTER",
		"OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_INSECURE", "false")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--mode", "passthrough", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "otel:") {
		t.Errorf("warnings: %s", r.stderr)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.spans["sage exec"] != 1 {
		t.Errorf("spans received: %v", rcv.spans)
	}
}

// TestExecConsoleExporter: OTEL_TRACES_EXPORTER=console prints the spans
// on stderr (stdout is the command's); the old command exported nothing.
func TestExecConsoleExporter(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_LOGS_EXPORTER", "none")
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--mode", "passthrough", "--", "echo out")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r.stdout != "out\n" {
		t.Errorf("stdout = %q: the spans go to stderr", r.stdout)
	}
	if !strings.Contains(r.stderr, `"Name":"sage exec"`) || !strings.Contains(r.stderr, `"Name":"sandbox.exec"`) {
		t.Errorf("stderr has no spans:\n%s", r.stderr)
	}
}
