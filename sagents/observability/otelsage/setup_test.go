package otelsage_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

// fakeCollector is an OTLP gRPC trace receiver on 127.0.0.1.
type fakeCollector struct {
	coltrace.UnimplementedTraceServiceServer
	addr string
	mu   sync.Mutex
	rs   []*tracepb.ResourceSpans
}

func (c *fakeCollector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	c.rs = append(c.rs, req.ResourceSpans...)
	c.mu.Unlock()
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// spans returns span names grouped by service.name.
func (c *fakeCollector) spans() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	for _, rs := range c.rs {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out[svc] = append(out[svc], s.Name)
			}
		}
	}
	return out
}

func startCollector(t *testing.T) *fakeCollector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &fakeCollector{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c
}

// closedPort returns a loopback address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func emit(m *observability.Manager) {
	ctx := m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "s", Name: "turn"})
	lctx := m.LLMStart(ctx, observability.LLMRequest{Model: "gpt-4o"})
	m.LLMEnd(lctx, observability.LLMResponse{Usage: observability.Usage{InputTokens: 7, OutputTokens: 3}})
	m.ChainEnd(ctx, observability.ChainResult{})
}

// setupEmit sets up the handler with opts (its own Manager, no globals,
// a quiet Logger unless opts has one), emits one chain with one model
// call through it and returns the shutdown.
func setupEmit(t *testing.T, opts sageotel.SetupOptions) func(context.Context) error {
	t.Helper()
	m, shutdown := setupManager(t, opts)
	emit(m)
	return shutdown
}

// shutdownTwice shuts down (within 30s) and again: the second is a no-op.
func shutdownTwice(t *testing.T, shutdown func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, shutdown(ctx))
	require.NoError(t, shutdown(ctx), "idempotent")
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSetupFromEnv(t *testing.T) {
	for _, tc := range []struct{ name, endpoint string }{
		{"host-port-loopback-is-insecure", "%s"},
		{"http-url", "http://%s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col := startCollector(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", strings.Replace(tc.endpoint, "%s", col.addr, 1))
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_SERVICE_NAME", "env-service")
			t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
			shutdown := setupEmit(t, sageotel.SetupOptions{})
			shutdownTwice(t, shutdown)
			got := col.spans()
			assert.ElementsMatch(t, []string{"turn", "chat gpt-4o"}, got["env-service"], "%v", got)
		})
	}
}

func TestSetupOptionsOverrideEnv(t *testing.T) {
	col := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", closedPort(t))
	t.Setenv("OTEL_SERVICE_NAME", "env-service")
	shutdown := setupEmit(t, sageotel.SetupOptions{Endpoint: col.addr, ServiceName: "opt-service"})
	require.NoError(t, shutdown(context.Background()))
	assert.Len(t, col.spans()["opt-service"], 2, "%v", col.spans())
}

func TestSetupSamplerFromEnv(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	rec := tracetest.NewSpanRecorder()
	shutdown := setupEmit(t, sageotel.SetupOptions{Endpoint: closedPort(t), SpanProcessors: []sdktrace.SpanProcessor{rec}})
	require.NoError(t, shutdown(context.Background()))
	assert.Empty(t, rec.Ended())
}

// An unreachable collector must not block the application: spans are
// dropped, counted, and the failure is logged once.
func TestSetupUnreachableCollector(t *testing.T) {
	logs := &testenv.Buffer{}
	m := observability.New(observability.Options{Logger: quiet()})
	shutdown, err := sageotel.Setup(context.Background(), sageotel.SetupOptions{Manager: m, NoGlobal: true, Endpoint: closedPort(t), ExportTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3000 { // more than one batch (512), and more than the queue (2048)
			emit(m)
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("emitting spans blocked on an unreachable collector")
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = shutdown(ctx) // may report the deadline of the final flush; must return
	assert.Less(t, time.Since(start), 45*time.Second, "shutdown is bounded by the export timeout")
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "cannot export spans"), out)
	assert.Equal(t, 1, strings.Count(out, "spans were dropped"), out)
}

func TestSetupPrometheusEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	m := observability.New(observability.Options{Logger: quiet()})
	shutdown, err := sageotel.Setup(context.Background(), sageotel.SetupOptions{Manager: m, NoGlobal: true, Endpoint: closedPort(t), ExportTimeout: 200 * time.Millisecond, PrometheusListener: ln, Logger: quiet()})
	require.NoError(t, err)
	defer func() { _ = shutdown(context.Background()) }()
	emit(m)

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)
	assert.Contains(t, text, "gen_ai_client_token_usage")
	assert.Contains(t, text, "gen_ai_client_operation_duration_seconds")
	assert.Contains(t, text, `gen_ai_token_type="input"`)
	assert.Contains(t, text, `gen_ai_request_model="gpt-4o"`)
}
