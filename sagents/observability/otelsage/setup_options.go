package otelsage

import (
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// SetupOption configures [Setup].
type SetupOption func(*setupConfig)

type setupConfig struct {
	serviceName   string
	endpoint      string
	protocol      string
	insecure      *bool
	exportTimeout time.Duration
	resAttrs      []attribute.KeyValue
	tp            trace.TracerProvider
	mp            metric.MeterProvider
	processors    []sdktrace.SpanProcessor
	promAddr      string
	promLn        net.Listener
	manager       *observability.Manager
	handlerOpts   []Option
	noGlobal      bool
	log           *slog.Logger
}

// WithServiceName sets service.name, overriding OTEL_SERVICE_NAME.
func WithServiceName(name string) SetupOption {
	return func(c *setupConfig) { c.serviceName = name }
}

// WithResourceAttributes adds resource attributes (they override
// OTEL_RESOURCE_ATTRIBUTES).
func WithResourceAttributes(attrs ...attribute.KeyValue) SetupOption {
	return func(c *setupConfig) { c.resAttrs = append(c.resAttrs, attrs...) }
}

// WithEndpoint sets the OTLP endpoint of traces and metrics ("host:port" or
// a URL), overriding OTEL_EXPORTER_OTLP_ENDPOINT and the per-signal
// variables. Over HTTP it is a base URL: /v1/traces and /v1/metrics are
// appended. Without a scheme, a loopback host is reached without TLS.
func WithEndpoint(endpoint string) SetupOption {
	return func(c *setupConfig) { c.endpoint = endpoint }
}

// WithInsecure forces plain-text (true) or TLS (false) to the collector.
func WithInsecure(on bool) SetupOption {
	return func(c *setupConfig) { c.insecure = &on }
}

// WithExportTimeout bounds each export, retries included (default
// DefaultExportTimeout).
func WithExportTimeout(d time.Duration) SetupOption {
	return func(c *setupConfig) { c.exportTimeout = d }
}

// WithExistingTracerProvider brings your own TracerProvider: Setup then creates no
// exporter and does not shut the provider down.
func WithExistingTracerProvider(tp trace.TracerProvider) SetupOption {
	return func(c *setupConfig) { c.tp = tp }
}

// WithExistingMeterProvider brings your own MeterProvider for the GenAI
// metrics: Setup then creates no OTLP metric exporter and does not shut the
// provider down.
func WithExistingMeterProvider(mp metric.MeterProvider) SetupOption {
	return func(c *setupConfig) { c.mp = mp }
}

// WithSpanProcessor adds a span processor to the TracerProvider that Setup
// builds (for example a second exporter, or a test recorder).
func WithSpanProcessor(sp sdktrace.SpanProcessor) SetupOption {
	return func(c *setupConfig) { c.processors = append(c.processors, sp) }
}

// WithPrometheus serves the metrics in the Prometheus text format at
// http://addr/metrics (off by default).
func WithPrometheus(addr string) SetupOption {
	return func(c *setupConfig) { c.promAddr = addr }
}

// WithPrometheusListener serves /metrics on an existing listener, which
// shutdown closes.
func WithPrometheusListener(ln net.Listener) SetupOption {
	return func(c *setupConfig) { c.promLn = ln }
}

// WithManager registers an OpenTelemetry [Handler] built on the providers
// with m.
func WithManager(m *observability.Manager, opts ...Option) SetupOption {
	return func(c *setupConfig) { c.manager = m; c.handlerOpts = append(c.handlerOpts, opts...) }
}

// WithoutGlobal leaves the global TracerProvider, MeterProvider and
// propagator alone.
func WithoutGlobal() SetupOption {
	return func(c *setupConfig) { c.noGlobal = true }
}

// WithLogger sets the logger for export failures (default slog.Default()).
func WithLogger(l *slog.Logger) SetupOption {
	return func(c *setupConfig) { c.log = l }
}

// WithProtocol sets the OTLP transport of both signals, ProtocolGRPC or
// ProtocolHTTP, overriding OTEL_EXPORTER_OTLP_PROTOCOL and its per-signal
// variants.
func WithProtocol(p string) SetupOption {
	return func(c *setupConfig) { c.protocol = p }
}
