package otelsage_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logpb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

// These tests export through Setup to the project's own OTLP/HTTP receiver
// (export_test.go), which decodes what arrives: metrics and logs, which
// Jaeger does not take.

// httpEnv points every signal at r over HTTP/protobuf (base URL
// http://addr/otlp).
func httpEnv(t *testing.T, r *receiver) {
	t.Helper()
	clearOTLPEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.addr+"/otlp")
	t.Setenv("OTEL_LOGS_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "")
}

// setupManager runs Setup with opts on a Manager of its own and returns
// both; the shutdown runs at cleanup when the test did not.
func setupManager(t *testing.T, opts sageotel.SetupOptions) (*observability.Manager, func(context.Context) error) {
	t.Helper()
	m := observability.New(observability.Options{Logger: quiet()})
	opts.Manager, opts.NoGlobal = m, true
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	shutdown, err := sageotel.Setup(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	return m, shutdown
}

func (r *receiver) logRecords() []*logpb.LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*logpb.LogRecord
	for _, rl := range r.rl {
		for _, sl := range rl.ScopeLogs {
			out = append(out, sl.LogRecords...)
		}
	}
	return out
}

func (r *receiver) metrics() map[string]*metricpb.Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*metricpb.Metric{}
	for _, rm := range r.rm {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				out[m.Name] = m
			}
		}
	}
	return out
}

func (r *receiver) metricSchemas() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for _, rm := range r.rm {
		for _, sm := range rm.ScopeMetrics {
			out[sm.SchemaUrl] = true
		}
	}
	return out
}

func kvs(attrs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	out := map[string]*commonpb.AnyValue{}
	for _, kv := range attrs {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestLogEventsReachTheCollector: a failed model call emits the
// gen_ai.client.operation.exception event (WARN, exception type and
// message, in the call's span), and with
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY every call
// its gen_ai.client.inference.operation.details event with the messages in
// structured form, and no content on spans. The old code emitted no log at
// all, so EVENT_ONLY captured nothing. Control: NO_CONTENT emits the
// exception event but no details.
func TestLogEventsReachTheCollector(t *testing.T) {
	for _, mode := range []string{"EVENT_ONLY", "NO_CONTENT"} {
		t.Run(mode, func(t *testing.T) {
			r := startReceiver(t, sageotel.ProtocolHTTP)
			httpEnv(t, r)
			t.Setenv(sageotel.CaptureContentEnv, mode)
			m, shutdown := setupManager(t, sageotel.SetupOptions{})
			ctx := m.AgentStart(context.Background(), observability.AgentInfo{SessionID: "s", Name: "a"})
			lctx := m.LLMStart(ctx, observability.LLMRequest{Model: "gpt-4o", Messages: []observability.Message{{Role: "user", Content: "secret question"}}})
			m.LLMEnd(lctx, observability.LLMResponse{Model: "gpt-4o-1", FinishReasons: []string{"stop"},
				Usage:    observability.Usage{InputTokens: 3, OutputTokens: 2},
				Messages: []observability.Message{{Role: "assistant", Content: "secret answer"}}})
			lctx = m.LLMStart(ctx, observability.LLMRequest{Model: "gpt-4o"})
			m.LLMError(lctx, rateLimited{})
			m.AgentEnd(ctx, observability.AgentResult{})
			require.NoError(t, shutdown(context.Background()))

			var exc, details []*logpb.LogRecord
			for _, l := range r.logRecords() {
				switch l.EventName {
				case sageotel.EventOperationException:
					exc = append(exc, l)
				case sageotel.EventOperationDetails:
					details = append(details, l)
				}
			}
			require.Len(t, exc, 1, "the failed call's exception event")
			e := exc[0]
			assert.Equal(t, logpb.SeverityNumber_SEVERITY_NUMBER_WARN, e.SeverityNumber)
			a := kvs(e.Attributes)
			assert.Equal(t, "429 Too Many Requests", a["exception.message"].GetStringValue())
			assert.Equal(t, "otelsage_test.rateLimited", a["exception.type"].GetStringValue())
			assert.Equal(t, "rate_limited", a["error.type"].GetStringValue())
			assert.Equal(t, "chat", a["gen_ai.operation.name"].GetStringValue())
			assert.Len(t, e.SpanId, 8, "the event belongs to the call's span")

			if mode == "NO_CONTENT" {
				assert.Empty(t, details, "control: the details event is opt-in")
				return
			}
			require.Len(t, details, 2)
			var ok *logpb.LogRecord
			for _, d := range details {
				if _, failed := kvs(d.Attributes)["error.type"]; !failed {
					ok = d
				}
			}
			require.NotNil(t, ok)
			da := kvs(ok.Attributes)
			in := da["gen_ai.input.messages"].GetArrayValue()
			require.NotNil(t, in, "structured, not a JSON string: %v", da["gen_ai.input.messages"])
			msg := kvs(in.Values[0].GetKvlistValue().Values)
			assert.Equal(t, "user", msg["role"].GetStringValue())
			part := kvs(msg["parts"].GetArrayValue().Values[0].GetKvlistValue().Values)
			assert.Equal(t, "secret question", part["content"].GetStringValue())
			out := da["gen_ai.output.messages"].GetArrayValue()
			require.NotNil(t, out)
			assert.Equal(t, "stop", kvs(out.Values[0].GetKvlistValue().Values)["finish_reason"].GetStringValue())
			assert.EqualValues(t, 3, da["gen_ai.usage.input_tokens"].GetIntValue())
			assert.Equal(t, "gpt-4o-1", da["gen_ai.response.model"].GetStringValue())

			r.mu.Lock()
			defer r.mu.Unlock()
			for _, rs := range r.rs {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						for _, kv := range s.Attributes {
							assert.NotContains(t, kv.GetValue().String(), "secret", "EVENT_ONLY puts no content on spans (%s)", s.Name)
						}
					}
				}
			}
		})
	}
}

// TestMetricsOverOTLP: what the collector receives in each version of the
// conventions: the release's gen_ai.client.operation.duration has
// gen_ai.provider.name (Required) on every operation, agents, tools and
// workflows included (the old code left it off), and
// gen_ai.client.operation.time_per_output_chunk gets a point per chunk
// after the first (the old code had no such metric); the development
// conventions' names and schema URL under the opt-in.
func TestMetricsOverOTLP(t *testing.T) {
	for _, latest := range []bool{false, true} {
		t.Run(map[bool]string{false: "release", true: "latest"}[latest], func(t *testing.T) {
			r := startReceiver(t, sageotel.ProtocolHTTP)
			httpEnv(t, r)
			m, shutdown := setupManager(t, sageotel.SetupOptions{Handler: sageotel.HandlerOptions{LatestExperimental: new(latest)}})
			scenario(m)
			require.NoError(t, shutdown(context.Background()))
			ms := r.metrics()
			names := make([]string, 0, len(ms))
			for n := range ms {
				names = append(names, n)
			}
			if !latest {
				dur := ms[sageotel.MetricOperationDuration]
				require.NotNil(t, dur, "metrics: %v", names)
				ops := map[string]bool{}
				for _, dp := range dur.GetHistogram().GetDataPoints() {
					a := kvs(dp.Attributes)
					op := a["gen_ai.operation.name"].GetStringValue()
					ops[op] = true
					assert.Equal(t, "openai", a["gen_ai.provider.name"].GetStringValue(), "%s lacks gen_ai.provider.name", op)
				}
				assert.Equal(t, map[string]bool{"chat": true, "embeddings": true, "execute_tool": true, "invoke_agent": true, "invoke_workflow": true}, ops)
				tpoc := ms[sageotel.MetricTimePerOutputChunk]
				require.NotNil(t, tpoc, "metrics: %v", names)
				require.Len(t, tpoc.GetHistogram().GetDataPoints(), 1)
				assert.EqualValues(t, 2, tpoc.GetHistogram().GetDataPoints()[0].GetCount())
				assert.Equal(t, map[string]bool{sageotel.SchemaURL: true}, r.metricSchemas())
				return
			}
			for _, want := range []string{sageotel.MetricInferenceDuration, sageotel.MetricInferenceTTFC, sageotel.MetricInferenceTPOC,
				sageotel.MetricUsageInputTokens, sageotel.MetricUsageCacheWriteTokens, sageotel.MetricOperationInputTokens,
				sageotel.MetricEmbeddingsDuration, sageotel.MetricEmbeddingsInput, sageotel.MetricInvokeAgentDuration,
				sageotel.MetricInvokeAgentInference, sageotel.MetricInvokeAgentToolCalls, sageotel.MetricExecuteToolDuration,
				sageotel.MetricWorkflowDuration} {
				assert.Contains(t, names, want)
			}
			for _, gone := range []string{sageotel.MetricOperationDuration, sageotel.MetricTokenUsage,
				sageotel.MetricTimeToFirstChunk, sageotel.MetricTimePerOutputChunk} {
				assert.NotContains(t, names, gone)
			}
			assert.Equal(t, map[string]bool{sageotel.LatestSchemaURL: true}, r.metricSchemas())
		})
	}
}

// TestTracesOnlyEndpoint: the traces-only setup Langfuse and Datadog
// document (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT over http/protobuf, nothing
// else) exports traces and starts no metric or log exporter; the old code
// also sent gRPC metrics to localhost:4317, failing with a warning and a
// delay at every exit. (The metrics' TLS setting makes that old failure
// certain whatever listens on 4317.) Control: OTEL_METRICS_EXPORTER=otlp
// asks for the default metrics and gets the warning.
func TestTracesOnlyEndpoint(t *testing.T) {
	for _, control := range []bool{false, true} {
		r := startReceiver(t, sageotel.ProtocolHTTP)
		clearOTLPEnv(t)
		t.Setenv("OTEL_LOGS_EXPORTER", "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+r.addr+"/otlp/v1/traces")
		t.Setenv("OTEL_EXPORTER_OTLP_METRICS_INSECURE", "false")
		if control {
			t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
		}
		logs := &testenv.Buffer{}
		m, shutdown := setupManager(t, sageotel.SetupOptions{Logger: slogTo(logs), ExportTimeout: 500 * time.Millisecond})
		emit(m)
		require.NoError(t, shutdown(context.Background()))
		assert.ElementsMatch(t, []string{"turn", "chat gpt-4o"}, r.spanNames()["sage"])
		if control {
			assert.Contains(t, logs.String(), "cannot export metrics", "control: metrics to the default endpoint")
			continue
		}
		assert.NotContains(t, logs.String(), "cannot export", logs.String())
		r.mu.Lock()
		assert.Equal(t, []string{"/otlp/v1/traces"}, dedup(r.paths), "only traces were exported")
		r.mu.Unlock()
	}
}

func dedup(in []string) []string {
	var out []string
	for _, s := range in {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// slowReceiver answers OTLP/HTTP exports after a delay.
func slowReceiver(t *testing.T, delay time.Duration) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &receiver{addr: ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return
		}
		r.ServeHTTP(w, req)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// TestExportTimeoutFromEnv: OTEL_EXPORTER_OTLP_TIMEOUT (milliseconds)
// bounds each export: a collector answering after 2 s is given up on with
// 200 ms (the old code ignored the variable and waited up to 5 s).
// Control: without it the same collector gets the spans. A value that is
// no number of milliseconds is an error naming the variable.
func TestExportTimeoutFromEnv(t *testing.T) {
	for _, timeout := range []string{"200", ""} {
		r := slowReceiver(t, 2*time.Second)
		httpEnv(t, r)
		t.Setenv("OTEL_METRICS_EXPORTER", "none")
		t.Setenv("OTEL_LOGS_EXPORTER", "none")
		t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", timeout)
		logs := &testenv.Buffer{}
		m, shutdown := setupManager(t, sageotel.SetupOptions{Logger: slogTo(logs)})
		emit(m)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = shutdown(ctx)
		cancel()
		if timeout != "" {
			assert.Contains(t, logs.String(), "cannot export spans", "a 200 ms export cannot wait 2 s")
			assert.Empty(t, r.spanNames())
			continue
		}
		assert.NotContains(t, logs.String(), "cannot export", "control")
		assert.Len(t, r.spanNames()["sage"], 2, "control")
	}
	clearOTLPEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon")
	_, err := sageotel.Setup(context.Background(), sageotel.SetupOptions{NoGlobal: true, Logger: quiet()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
}

// TestConsoleExporters: OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER and
// OTEL_LOGS_EXPORTER =console write the spans, metrics and log events to
// the console writer (stderr by default); the old code exported nothing,
// silently. An exporter name Setup does not know is an error naming the
// variable and the names it takes.
func TestConsoleExporters(t *testing.T) {
	clearOTLPEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_METRICS_EXPORTER", "console")
	t.Setenv("OTEL_LOGS_EXPORTER", "console")
	out := &testenv.Buffer{}
	m, shutdown := setupManager(t, sageotel.SetupOptions{ConsoleWriter: out})
	emit(m)
	lctx := m.LLMStart(context.Background(), observability.LLMRequest{Model: "m"})
	m.LLMError(lctx, rateLimited{})
	require.NoError(t, shutdown(context.Background()))
	text := out.String()
	assert.Contains(t, text, `"Name":"chat gpt-4o"`, "spans")
	assert.Contains(t, text, `"Name":"gen_ai.client.operation.duration"`, "metrics")
	assert.Contains(t, text, sageotel.EventOperationException, "log events")

	for name, value := range map[string]string{"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_METRICS_EXPORTER": "otlp,statsd", "OTEL_LOGS_EXPORTER": "jaeger"} {
		clearOTLPEnv(t)
		t.Setenv("OTEL_LOGS_EXPORTER", "")
		t.Setenv(name, value)
		_, err := sageotel.Setup(context.Background(), sageotel.SetupOptions{NoGlobal: true, Logger: quiet()})
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), name)
		assert.True(t, strings.Contains(err.Error(), "console"), err.Error())
	}
}
