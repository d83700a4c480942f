package otel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// DefaultServiceName is the service.name used when neither an option nor
// OTEL_SERVICE_NAME sets one.
const DefaultServiceName = "sage"

// DefaultExportTimeout bounds one export (all retries included) and the
// default shutdown when its context has no deadline.
const DefaultExportTimeout = 5 * time.Second

// SetupOption configures [Setup].
type SetupOption func(*setupConfig)

type setupConfig struct {
	serviceName   string
	endpoint      string
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

// WithEndpoint sets the OTLP gRPC endpoint ("host:port" or a URL),
// overriding OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_ENDPOINT.
// Without a scheme, a loopback host is reached without TLS.
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
// metrics. It is not shut down by Setup's shutdown.
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

// Setup configures OpenTelemetry for the process: a TracerProvider with an
// OTLP gRPC exporter behind a batch processor (unless one is brought with
// [WithExistingTracerProvider]), the standard OTEL_* environment variables
// (endpoint, headers, service name, resource attributes, sampler, batch
// settings), an optional Prometheus endpoint, and the global providers.
//
// Setup does not connect: an unreachable collector never blocks or fails the
// application. Failed exports are dropped, counted and logged once; each
// export is bounded by the export timeout.
//
// The returned shutdown flushes and stops everything Setup created. It is
// idempotent and, when ctx has no deadline, bounded by the export timeout.
func Setup(ctx context.Context, opts ...SetupOption) (shutdown func(context.Context) error, err error) {
	c := setupConfig{exportTimeout: DefaultExportTimeout, log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if c.exportTimeout <= 0 {
		c.exportTimeout = DefaultExportTimeout
	}
	if c.log == nil {
		c.log = slog.Default()
	}

	var closers []func(context.Context) error
	cleanup := func(ctx context.Context) error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i](ctx))
		}
		return errors.Join(errs...)
	}

	res, err := buildResource(ctx, &c)
	if err != nil {
		return nil, err
	}

	tp := c.tp
	var counter *countingExporter
	if tp == nil {
		counter, err = newExporter(ctx, &c)
		if err != nil {
			return nil, err
		}
		topts := []sdktrace.TracerProviderOption{
			sdktrace.WithResource(res),
			sdktrace.WithBatcher(counter, sdktrace.WithExportTimeout(c.exportTimeout)),
		}
		for _, sp := range c.processors {
			topts = append(topts, sdktrace.WithSpanProcessor(sp))
		}
		sdkTP := sdktrace.NewTracerProvider(topts...)
		tp = sdkTP
		closers = append(closers, func(ctx context.Context) error {
			err := sdkTP.Shutdown(ctx)
			if n := counter.dropped.Load(); n > 0 {
				c.log.Warn("otel: spans were dropped because the collector was unreachable",
					"endpoint", counter.endpoint, "dropped_spans", n)
			}
			if err != nil {
				return fmt.Errorf("otel: shut down tracer provider: %w", err)
			}
			return nil
		})
	}

	mp := c.mp
	if c.promAddr != "" || c.promLn != nil {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			_ = cleanup(ctx)
			return nil, fmt.Errorf("otel: prometheus exporter: %w", err)
		}
		sdkMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		closers = append(closers, func(ctx context.Context) error {
			if err := sdkMP.Shutdown(ctx); err != nil {
				return fmt.Errorf("otel: shut down meter provider: %w", err)
			}
			return nil
		})
		if mp == nil {
			mp = sdkMP
		}
		ln := c.promLn
		if ln == nil {
			ln, err = net.Listen("tcp", c.promAddr)
			if err != nil {
				_ = cleanup(ctx)
				return nil, fmt.Errorf("otel: prometheus listen %s: %w", c.promAddr, err)
			}
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.log.Error("otel: prometheus endpoint stopped", "error", err)
			}
		}()
		closers = append(closers, func(ctx context.Context) error {
			if err := srv.Shutdown(ctx); err != nil {
				return fmt.Errorf("otel: stop prometheus endpoint: %w", err)
			}
			return nil
		})
	}

	if !c.noGlobal {
		otelapi.SetTracerProvider(tp)
		if mp != nil {
			otelapi.SetMeterProvider(mp)
		}
		otelapi.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
			propagation.TraceContext{}, propagation.Baggage{}))
	}

	if c.manager != nil {
		hopts := []Option{WithTracerProvider(tp)}
		if mp != nil {
			hopts = append(hopts, WithMeterProvider(mp))
		}
		h, err := NewHandler(append(hopts, c.handlerOpts...)...)
		if err != nil {
			_ = cleanup(ctx)
			return nil, err
		}
		c.manager.Register(h)
	}

	var once sync.Once
	var shutdownErr error
	timeout := c.exportTimeout
	return func(ctx context.Context) error {
		once.Do(func() {
			if _, ok := ctx.Deadline(); !ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			shutdownErr = cleanup(ctx)
		})
		return shutdownErr
	}, nil
}

func buildResource(ctx context.Context, c *setupConfig) (*resource.Resource, error) {
	attrs := append([]attribute.KeyValue(nil), c.resAttrs...)
	if c.serviceName != "" {
		attrs = append(attrs, attribute.String("service.name", c.serviceName))
	}
	// Later detectors override earlier ones: default < env < options.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(attrs...),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("otel: build resource: %w", err)
	}
	return res, nil // a partial resource (err != nil) is still usable
}

// endpointFromEnv returns the configured trace endpoint, or "".
func endpointFromEnv() string {
	if v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
		return v
	}
	return strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

// resolveEndpoint turns an endpoint setting into host:port and whether to
// use plain text: http:// and loopback hosts without a scheme are insecure.
func resolveEndpoint(raw string) (hostport string, insecure bool) {
	if raw == "" {
		return "localhost:4317", true
	}
	scheme := ""
	hostport = raw
	if i := strings.Index(raw, "://"); i >= 0 {
		if u, err := url.Parse(raw); err == nil {
			scheme, hostport = u.Scheme, u.Host
		}
	}
	switch scheme {
	case "http":
		return hostport, true
	case "https":
		return hostport, false
	}
	return hostport, isLoopback(hostport)
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

func newExporter(ctx context.Context, c *setupConfig) (*countingExporter, error) {
	raw := c.endpoint
	if raw == "" {
		raw = endpointFromEnv()
	}
	hostport, insecure := resolveEndpoint(raw)
	if v, err := strconv.ParseBool(os.Getenv("OTEL_EXPORTER_OTLP_INSECURE")); err == nil {
		insecure = v
	}
	if c.insecure != nil {
		insecure = *c.insecure
	}
	eopts := []otlptracegrpc.Option{
		otlptracegrpc.WithEndpoint(hostport),
		otlptracegrpc.WithTimeout(c.exportTimeout),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{
			Enabled:         true,
			InitialInterval: 100 * time.Millisecond,
			MaxInterval:     time.Second,
			MaxElapsedTime:  c.exportTimeout,
		}),
	}
	if insecure {
		eopts = append(eopts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, eopts...)
	if err != nil {
		return nil, fmt.Errorf("otel: OTLP gRPC exporter for %s: %w", hostport, err)
	}
	return &countingExporter{SpanExporter: exp, endpoint: hostport, log: c.log}, nil
}

// countingExporter drops the spans of a failed export instead of reporting
// the error on every batch: it counts them and logs the first failure.
type countingExporter struct {
	sdktrace.SpanExporter
	endpoint string
	log      *slog.Logger
	dropped  atomic.Int64
	once     sync.Once
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		n := e.dropped.Add(int64(len(spans)))
		e.once.Do(func() {
			e.log.Warn("otel: cannot export spans, dropping them (logged once; the total is logged at shutdown)",
				"endpoint", e.endpoint, "dropped_spans", n, "error", err)
		})
	}
	return nil
}
