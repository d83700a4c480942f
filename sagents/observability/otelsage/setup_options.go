package otelsage

import (
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// SetupOptions configures [Setup]. The zero value exports what the
// OTEL_* environment variables say, or to a local collector when they say
// nothing.
type SetupOptions struct {
	// ServiceName sets service.name, overriding OTEL_SERVICE_NAME.
	ServiceName string
	// ResourceAttributes are added to the resource (they override
	// OTEL_RESOURCE_ATTRIBUTES).
	ResourceAttributes []attribute.KeyValue

	// Endpoint is the OTLP endpoint of traces and metrics ("host:port" or a
	// URL), overriding OTEL_EXPORTER_OTLP_ENDPOINT and the per-signal
	// variables. Over HTTP it is a base URL: /v1/traces and /v1/metrics are
	// appended. Without a scheme, a loopback host is reached without TLS.
	Endpoint string
	// Protocol is the OTLP transport of both signals, protocolGRPC or
	// protocolHTTP, overriding OTEL_EXPORTER_OTLP_PROTOCOL and its
	// per-signal variants.
	Protocol string
	// Insecure forces plain text (true) or TLS (false) to the collector;
	// nil decides from the endpoint and the environment.
	Insecure *bool
	// ExportTimeout bounds each export, retries included; when <= 0,
	// OTEL_EXPORTER_OTLP_TIMEOUT (or its per-signal variant, in
	// milliseconds) decides, else DefaultExportTimeout.
	ExportTimeout time.Duration

	// TracerProvider brings your own: Setup then creates no trace exporter
	// and does not shut the provider down.
	TracerProvider trace.TracerProvider
	// MeterProvider brings your own for the GenAI metrics: Setup then
	// creates no OTLP metric exporter and does not shut the provider down.
	MeterProvider metric.MeterProvider
	// LoggerProvider brings your own for the GenAI log events: Setup then
	// creates no log exporter and does not shut the provider down.
	LoggerProvider otellog.LoggerProvider
	// SpanProcessors are added to the TracerProvider that Setup builds (for
	// example a second exporter, or a test recorder).
	SpanProcessors []sdktrace.SpanProcessor
	// ConsoleWriter receives what the console exporters write
	// (OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER or OTEL_LOGS_EXPORTER
	// =console); nil means os.Stderr, as stdout may carry a protocol
	// (sage mcp) or a command's output.
	ConsoleWriter io.Writer

	// PrometheusAddr serves the metrics in the Prometheus text format at
	// http://PrometheusAddr/metrics (off when empty).
	PrometheusAddr string
	// PrometheusListener serves /metrics on an existing listener, which
	// shutdown closes.
	PrometheusListener net.Listener

	// Manager, when set, gets an OpenTelemetry [Handler] built on the
	// providers, configured by Handler (whose providers Setup fills in).
	Manager *observability.Manager
	Handler HandlerOptions

	// NoGlobal leaves the global TracerProvider, MeterProvider and
	// propagator alone.
	NoGlobal bool
	// Logger receives export failures (slog.Default() when nil).
	Logger *slog.Logger
}

type setupConfig struct {
	serviceName    string
	endpoint       string
	protocol       string
	insecure       *bool
	exportTimeout  time.Duration
	timeoutFromEnv bool // no option: OTEL_EXPORTER_OTLP_*TIMEOUT may set it
	resAttrs       []attribute.KeyValue
	tp             trace.TracerProvider
	mp             metric.MeterProvider
	lp             otellog.LoggerProvider
	console        io.Writer
	processors     []sdktrace.SpanProcessor
	promAddr       string
	promLn         net.Listener
	manager        *observability.Manager
	handler        HandlerOptions
	noGlobal       bool
	log            *slog.Logger
}

// config applies the defaults.
func (o SetupOptions) config() setupConfig {
	c := setupConfig{
		serviceName: o.ServiceName, endpoint: o.Endpoint, protocol: o.Protocol, insecure: o.Insecure,
		exportTimeout: o.ExportTimeout, resAttrs: o.ResourceAttributes, tp: o.TracerProvider,
		mp: o.MeterProvider, lp: o.LoggerProvider, console: o.ConsoleWriter, processors: o.SpanProcessors, promAddr: o.PrometheusAddr,
		promLn: o.PrometheusListener, manager: o.Manager, handler: o.Handler, noGlobal: o.NoGlobal,
		log: o.Logger,
	}
	if c.exportTimeout <= 0 {
		c.exportTimeout, c.timeoutFromEnv = DefaultExportTimeout, true
	}
	if c.console == nil {
		c.console = os.Stderr
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c
}
