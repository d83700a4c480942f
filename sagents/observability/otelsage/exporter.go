package otelsage

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP transports, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	protocolGRPC = "grpc"
	protocolHTTP = "http/protobuf"
)

// signal is one OTLP signal: its environment-variable infix and HTTP path.
type signal struct {
	env  string // TRACES, METRICS, LOGS
	path string // /v1/traces, /v1/metrics, /v1/logs
}

var (
	signalTraces  = signal{env: "TRACES", path: "/v1/traces"}
	signalMetrics = signal{env: "METRICS", path: "/v1/metrics"}
	signalLogs    = signal{env: "LOGS", path: "/v1/logs"}
	allSignals    = []signal{signalTraces, signalMetrics, signalLogs}
)

// name is the signal in lower case ("traces").
func (s signal) name() string { return strings.ToLower(s.env) }

// exporterVar is the signal's OTEL_*_EXPORTER variable.
func (s signal) exporterVar() string { return "OTEL_" + s.env + "_EXPORTER" }

// endpointFor reports whether an endpoint is configured that applies to
// sig (the Setup option, the general variable or sig's own), and whether
// any endpoint is configured at all.
func endpointFor(sig signal, c *setupConfig, getenv func(string) string) (applies, any bool) {
	if c.endpoint != "" || strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" {
		return true, true
	}
	for _, s := range allSignals {
		if strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_"+s.env+"_ENDPOINT")) != "" {
			any = true
			if s == sig {
				applies = true
			}
		}
	}
	return applies, any
}

// target is where and how one signal is exported.
type target struct {
	protocol string // protocolGRPC or protocolHTTP
	hostport string
	path     string // the URL path (HTTP only)
	insecure bool
	timeout  time.Duration // of one export, retries included
}

// String is the target as a log attribute.
func (t target) String() string {
	if t.protocol == protocolHTTP {
		scheme := "https"
		if t.insecure {
			scheme = "http"
		}
		return scheme + "://" + t.hostport + t.path
	}
	return t.hostport
}

// resolveTarget applies the OTLP exporter settings in the order every OTel
// SDK applies them: the Setup option, then the per-signal variable
// (OTEL_EXPORTER_OTLP_TRACES_*), then the general one (OTEL_EXPORTER_OTLP_*),
// then the default (gRPC on localhost:4317, HTTP on localhost:4318).
//
// A per-signal HTTP endpoint is used as is; the general one and the
// [WithEndpoint] option are base URLs to which the signal's path
// (/v1/traces, /v1/metrics) is appended. Without a scheme, a loopback host is
// reached in plain text; http:// and https:// say so explicitly, and the
// INSECURE variables and [WithInsecure] override both.
func resolveTarget(sig signal, c *setupConfig, getenv func(string) string) (target, error) {
	env := func(name string) string {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + sig.env + "_" + name)); v != "" {
			return v
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
	}
	t := target{protocol: c.protocol}
	if t.protocol == "" {
		t.protocol = strings.ToLower(env("PROTOCOL"))
	}
	switch t.protocol {
	case "":
		t.protocol = protocolGRPC
	case protocolGRPC, protocolHTTP:
	default:
		return target{}, fmt.Errorf("otel: OTLP protocol %q for %s is not supported (want %q or %q)",
			t.protocol, strings.ToLower(sig.env), protocolGRPC, protocolHTTP)
	}

	raw, asIs := c.endpoint, false
	if raw == "" {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + sig.env + "_ENDPOINT")); v != "" {
			raw, asIs = v, true
		} else {
			raw = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
		}
	}
	if raw == "" {
		raw = "localhost:4317"
		if t.protocol == protocolHTTP {
			raw = "localhost:4318"
		}
	}
	var path string
	t.hostport, path, t.insecure = splitEndpoint(raw)
	if t.protocol == protocolHTTP {
		switch {
		case asIs && path != "" && path != "/":
			t.path = path
		default:
			t.path = strings.TrimSuffix(path, "/") + sig.path
		}
	}
	if v := env("INSECURE"); v != "" {
		if b, err := strconv.ParseBool(v); err == nil {
			t.insecure = b
		}
	}
	if c.insecure != nil {
		t.insecure = *c.insecure
	}
	t.timeout = c.exportTimeout
	if c.timeoutFromEnv {
		for _, name := range []string{"OTEL_EXPORTER_OTLP_" + sig.env + "_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"} {
			v := strings.TrimSpace(getenv(name))
			if v == "" {
				continue
			}
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms <= 0 {
				return target{}, fmt.Errorf("otel: %s=%q: want a positive number of milliseconds", name, v)
			}
			t.timeout = time.Duration(ms) * time.Millisecond
			break
		}
	}
	return t, nil
}

// splitEndpoint turns an endpoint setting into host:port, URL path and
// whether to use plain text.
func splitEndpoint(raw string) (hostport, path string, insecure bool) {
	if strings.Contains(raw, "://") {
		if u, err := url.Parse(raw); err == nil {
			hostport, path = u.Host, u.Path
			switch u.Scheme {
			case "http":
				return hostport, path, true
			case "https":
				return hostport, path, false
			}
			return hostport, path, isLoopback(hostport)
		}
	}
	return raw, "", isLoopback(raw)
}

// resolveEndpoint is splitEndpoint without the path, the gRPC view.
func resolveEndpoint(raw string) (hostport string, insecure bool) {
	if raw == "" {
		return "localhost:4317", true
	}
	hostport, _, insecure = splitEndpoint(raw)
	return hostport, insecure
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// exportersFromEnv reads a comma-separated OTEL_*_EXPORTER list: ok is
// false when the variable is unset. A value not in known is an error
// naming the variable and what it takes.
func exportersFromEnv(name string, known ...string) (set map[string]bool, ok bool, err error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return nil, false, nil
	}
	set = map[string]bool{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.ToLower(strings.TrimSpace(s)); s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			return nil, true, fmt.Errorf("otel: %s=%q: %q is not supported (want %s)", name, v, s, strings.Join(known, ", "))
		}
		set[s] = true
	}
	return set, true, nil
}

func retry(t target) (initial, maxInterval, maxElapsed time.Duration) {
	return 100 * time.Millisecond, time.Second, t.timeout
}

// newSpanExporter builds the OTLP span exporter of t.
func newSpanExporter(ctx context.Context, c *setupConfig, t target) (*countingExporter, error) {
	ini, mx, el := retry(t)
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch t.protocol {
	case protocolHTTP:
		opts := []otlptracehttp.Option{
			otlptracehttp.WithEndpoint(t.hostport), otlptracehttp.WithURLPath(t.path),
			otlptracehttp.WithTimeout(t.timeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: ini, MaxInterval: mx, MaxElapsedTime: el}),
		}
		if t.insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		opts := []otlptracegrpc.Option{
			otlptracegrpc.WithEndpoint(t.hostport), otlptracegrpc.WithTimeout(t.timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: ini, MaxInterval: mx, MaxElapsedTime: el}),
		}
		if t.insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("otel: OTLP %s span exporter for %s: %w", t.protocol, t, err)
	}
	return &countingExporter{SpanExporter: exp, drops: drops{what: "spans", key: "dropped_spans", endpoint: t.String(), log: c.log}}, nil
}

// newMetricExporter builds the OTLP metric exporter of t. Temporality
// follows OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE (read by the
// exporter).
func newMetricExporter(ctx context.Context, c *setupConfig, t target) (*countingMetricExporter, error) {
	ini, mx, el := retry(t)
	var (
		exp sdkmetric.Exporter
		err error
	)
	switch t.protocol {
	case protocolHTTP:
		opts := []otlpmetrichttp.Option{
			otlpmetrichttp.WithEndpoint(t.hostport), otlpmetrichttp.WithURLPath(t.path),
			otlpmetrichttp.WithTimeout(t.timeout),
			otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: true, InitialInterval: ini, MaxInterval: mx, MaxElapsedTime: el}),
		}
		if t.insecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	default:
		opts := []otlpmetricgrpc.Option{
			otlpmetricgrpc.WithEndpoint(t.hostport), otlpmetricgrpc.WithTimeout(t.timeout),
			otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: true, InitialInterval: ini, MaxInterval: mx, MaxElapsedTime: el}),
		}
		if t.insecure {
			opts = append(opts, otlpmetricgrpc.WithInsecure())
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("otel: OTLP %s metric exporter for %s: %w", t.protocol, t, err)
	}
	return &countingMetricExporter{Exporter: exp, drops: drops{what: "metrics", key: "dropped_exports", endpoint: t.String(), log: c.log}}, nil
}

// newLogExporter builds the OTLP log exporter of t.
func newLogExporter(ctx context.Context, c *setupConfig, t target) (*countingLogExporter, error) {
	ini, mx, el := retry(t)
	var (
		exp sdklog.Exporter
		err error
	)
	switch t.protocol {
	case protocolHTTP:
		opts := []otlploghttp.Option{
			otlploghttp.WithEndpoint(t.hostport), otlploghttp.WithURLPath(t.path),
			otlploghttp.WithTimeout(t.timeout),
			otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: true, InitialInterval: ini, MaxInterval: mx, MaxElapsedTime: el}),
		}
		if t.insecure {
			opts = append(opts, otlploghttp.WithInsecure())
		}
		exp, err = otlploghttp.New(ctx, opts...)
	default:
		opts := []otlploggrpc.Option{
			otlploggrpc.WithEndpoint(t.hostport), otlploggrpc.WithTimeout(t.timeout),
			otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: true, InitialInterval: ini, MaxInterval: mx, MaxElapsedTime: el}),
		}
		if t.insecure {
			opts = append(opts, otlploggrpc.WithInsecure())
		}
		exp, err = otlploggrpc.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("otel: OTLP %s log exporter for %s: %w", t.protocol, t, err)
	}
	return &countingLogExporter{Exporter: exp, drops: drops{what: "log records", key: "dropped_records", endpoint: t.String(), log: c.log}}, nil
}

// drops counts what an exporter dropped instead of reporting the error of
// every export: it logs the first failure, and the total at shutdown
// (closer).
type drops struct {
	what     string // "spans", "metrics"
	key      string // the total's log key: "dropped_spans", "dropped_exports"
	endpoint string
	log      *slog.Logger
	n        atomic.Int64
	once     sync.Once
}

func (d *drops) add(n int64, err error) {
	total := d.n.Add(n)
	d.once.Do(func() {
		d.log.Warn("otel: cannot export "+d.what+", dropping them (logged once; the total is logged at shutdown)",
			"endpoint", d.endpoint, d.key, total, "error", err)
	})
}

// closer returns the closer of a provider: shut, then msg with the total
// d dropped, if any (d is nil without an exporter).
func (d *drops) closer(provider string, shut func(context.Context) error, msg string) func(context.Context) error {
	return func(ctx context.Context) error {
		err := shut(ctx)
		if d != nil {
			if n := d.n.Load(); n > 0 {
				d.log.Warn(msg, "endpoint", d.endpoint, d.key, n)
			}
		}
		if err != nil {
			return fmt.Errorf("otel: shut down %s: %w", provider, err)
		}
		return nil
	}
}

// countingExporter is a span exporter whose failed exports are dropped
// and counted (drops).
type countingExporter struct {
	sdktrace.SpanExporter
	drops
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.add(int64(len(spans)), err)
	}
	return nil
}

// countingMetricExporter is countingExporter for metric exports.
type countingMetricExporter struct {
	sdkmetric.Exporter
	drops
}

func (e *countingMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := e.Exporter.Export(ctx, rm); err != nil {
		e.add(1, err)
	}
	return nil
}

// countingLogExporter is countingExporter for log records.
type countingLogExporter struct {
	sdklog.Exporter
	drops
}

func (e *countingLogExporter) Export(ctx context.Context, records []sdklog.Record) error {
	if err := e.Exporter.Export(ctx, records); err != nil {
		e.add(int64(len(records)), err)
	}
	return nil
}
