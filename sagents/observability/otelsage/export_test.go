package otelsage_test

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collog "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logpb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sage-go/sage/internal/testenv"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

// receiver is an in-process OTLP receiver (traces and metrics) on
// 127.0.0.1, over gRPC or HTTP/protobuf, that decodes what arrives.
type receiver struct {
	coltrace.UnimplementedTraceServiceServer
	addr  string
	mu    sync.Mutex
	rs    []*tracepb.ResourceSpans
	rm    []*metricpb.ResourceMetrics
	rl    []*logpb.ResourceLogs
	paths []string
	auth  []string // the Authorization header of each HTTP export
}

func (r *receiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	r.rs = append(r.rs, req.ResourceSpans...)
	r.mu.Unlock()
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	colmetric.UnimplementedMetricsServiceServer
	r *receiver
}

func (m metricsService) Export(_ context.Context, req *colmetric.ExportMetricsServiceRequest) (*colmetric.ExportMetricsServiceResponse, error) {
	m.r.mu.Lock()
	m.r.rm = append(m.r.rm, req.ResourceMetrics...)
	m.r.mu.Unlock()
	return &colmetric.ExportMetricsServiceResponse{}, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, req.Body, 8<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 8<<20))
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, req.URL.Path)
	r.auth = append(r.auth, req.Header.Get("Authorization"))
	var resp proto.Message
	switch req.URL.Path {
	case "/otlp/v1/traces":
		var m coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.rs = append(r.rs, m.ResourceSpans...)
		resp = &coltrace.ExportTraceServiceResponse{}
	case "/otlp/v1/metrics":
		var m colmetric.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.rm = append(r.rm, m.ResourceMetrics...)
		resp = &colmetric.ExportMetricsServiceResponse{}
	case "/otlp/v1/logs":
		var m collog.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.rl = append(r.rl, m.ResourceLogs...)
		resp = &collog.ExportLogsServiceResponse{}
	default:
		http.NotFound(w, req)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func startReceiver(t *testing.T, protocol string) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &receiver{addr: ln.Addr().String()}
	if protocol == sageotel.ProtocolGRPC {
		srv := grpc.NewServer()
		coltrace.RegisterTraceServiceServer(srv, r)
		colmetric.RegisterMetricsServiceServer(srv, metricsService{r: r})
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(srv.Stop)
		return r
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// spanNames returns the span names received, by service.name.
func (r *receiver) spanNames() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, rs := range r.rs {
		svc := resourceService(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out[svc] = append(out[svc], s.Name)
			}
		}
	}
	return out
}

// tokenSums returns the gen_ai.client.token.usage sums by token type, and
// the names of every metric received.
func (r *receiver) tokenSums() (map[string]float64, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sums := map[string]float64{}
	names := map[string]bool{}
	for _, rm := range r.rm {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				names[m.Name] = true
				if m.Name != "gen_ai.client.token.usage" {
					continue
				}
				for _, dp := range m.GetHistogram().GetDataPoints() {
					for _, kv := range dp.Attributes {
						if kv.Key == "gen_ai.token.type" {
							sums[kv.GetValue().GetStringValue()] += dp.GetSum()
						}
					}
				}
			}
		}
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	return sums, list
}

func resourceService(kvs []*commonKV) string {
	for _, kv := range kvs {
		if kv.Key == "service.name" {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func clearOTLPEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
		"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION",
		"OTEL_LOGS_EXPORTER", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
		"OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_INSECURE", sageotel.CaptureContentEnv,
		sageotel.SemconvOptInEnv} {
		t.Setenv(k, "")
	}
}

// TestSetupExportsTracesAndMetrics: a real OTLP export of both signals
// arrives at a local receiver, over gRPC and over HTTP/protobuf, chosen by
// the environment alone.
func TestSetupExportsTracesAndMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, protocol string
		env            func(addr string) map[string]string
	}{
		{"grpc-default", sageotel.ProtocolGRPC, func(addr string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": addr}
		}},
		{"http-general-endpoint", sageotel.ProtocolHTTP, func(addr string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr + "/otlp",
				"OTEL_EXPORTER_OTLP_HEADERS":  "Authorization=Basic%20cGs6c2s="} // as Langfuse wants it
		}},
		{"http-per-signal", sageotel.ProtocolHTTP, func(addr string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":  "http/protobuf",
				"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":  "http://" + addr + "/otlp/v1/traces",
				"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://" + addr + "/otlp/v1/metrics",
				"OTEL_EXPORTER_OTLP_COMPRESSION":      "gzip",
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearOTLPEnv(t)
			r := startReceiver(t, tc.protocol)
			for k, v := range tc.env(r.addr) {
				t.Setenv(k, v)
			}
			t.Setenv("OTEL_SERVICE_NAME", "export-test")
			shutdown := setupEmit(t, sageotel.SetupOptions{})
			shutdownTwice(t, shutdown)

			got := r.spanNames()
			assert.ElementsMatch(t, []string{"turn", "chat gpt-4o"}, got["export-test"], "%v", got)
			sums, names := r.tokenSums()
			assert.Equal(t, map[string]float64{"input": 7, "output": 3}, sums, "metrics received: %v", names)
			assert.Contains(t, names, "gen_ai.client.operation.duration")
			if tc.protocol == sageotel.ProtocolHTTP {
				r.mu.Lock()
				assert.Subset(t, []string{"/otlp/v1/traces", "/otlp/v1/metrics"}, r.paths)
				if tc.name == "http-general-endpoint" {
					for _, a := range r.auth {
						assert.Equal(t, "Basic cGs6c2s=", a, "OTEL_EXPORTER_OTLP_HEADERS reach the collector")
					}
				}
				r.mu.Unlock()
			}
		})
	}
}

// TestSetupMetricsExporterNone: OTEL_METRICS_EXPORTER=none sends no metrics,
// OTEL_TRACES_EXPORTER=none no spans.
func TestSetupExportersNone(t *testing.T) {
	clearOTLPEnv(t)
	r := startReceiver(t, sageotel.ProtocolGRPC)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.addr)
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	shutdown := setupEmit(t, sageotel.SetupOptions{})
	require.NoError(t, shutdown(context.Background()))
	assert.Empty(t, r.spanNames())
	_, names := r.tokenSums()
	assert.Empty(t, names)
}

// TestSetupUnreachableMetrics: an unreachable metric collector is logged
// once and never fails shutdown beyond its bound.
func TestSetupUnreachableMetrics(t *testing.T) {
	clearOTLPEnv(t)
	logs := &testenv.Buffer{}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	shutdown := setupEmit(t, sageotel.SetupOptions{Endpoint: "http://" + closedPort(t), ExportTimeout: 300 * time.Millisecond, Logger: slogTo(logs)})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = shutdown(ctx)
	assert.Less(t, time.Since(start), 20*time.Second)
	out := logs.String()
	assert.Equal(t, 1, countOf(out, "cannot export metrics"), out)
	assert.Equal(t, 1, countOf(out, "metric exports were dropped"), out)
	assert.Equal(t, 1, countOf(out, "cannot export spans"), out)
}

type commonKV = commonpb.KeyValue

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func countOf(s, sub string) int { return strings.Count(s, sub) }

// TestSetupExistingProviderMeansNoOTLPMetrics: an application that brings
// its TracerProvider gets no OTLP metric exporter unless it asks for one.
func TestSetupExistingProviderMeansNoOTLPMetrics(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want bool
	}{{"", false}, {"otlp", true}} {
		t.Run("OTEL_METRICS_EXPORTER="+tc.env, func(t *testing.T) {
			clearOTLPEnv(t)
			r := startReceiver(t, sageotel.ProtocolGRPC)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.addr)
			t.Setenv("OTEL_METRICS_EXPORTER", tc.env)
			shutdown := setupEmit(t, sageotel.SetupOptions{TracerProvider: sdktrace.NewTracerProvider()})
			require.NoError(t, shutdown(context.Background()))
			_, names := r.tokenSums()
			assert.Equal(t, tc.want, len(names) > 0, "metrics received: %v", names)
			assert.Empty(t, r.spanNames(), "the brought provider exports nothing here")
		})
	}
}
