package otelsage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutlog"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	otellog "go.opentelemetry.io/otel/log"
	logglobal "go.opentelemetry.io/otel/log/global"
	lognoop "go.opentelemetry.io/otel/log/noop"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is the service.name used when neither an option nor
// OTEL_SERVICE_NAME sets one.
const DefaultServiceName = "sage"

// DefaultExportTimeout bounds one export (all retries included) and the
// default shutdown when its context has no deadline.
const DefaultExportTimeout = 5 * time.Second

// Setup configures OpenTelemetry for the process from the standard OTEL_*
// environment variables, options overriding them:
//
//   - traces: a TracerProvider with an OTLP exporter (gRPC or HTTP, see
//     [WithProtocol]) behind a batch processor, unless one is brought with
//     [WithExistingTracerProvider]; OTEL_TRACES_EXPORTER (otlp, console,
//     none) decides when set; sampler and batch settings come from the
//     environment;
//   - metrics: a MeterProvider with a periodic OTLP exporter (unless
//     OTEL_METRICS_EXPORTER leaves out "otlp", or, when it is unset, a
//     TracerProvider or MeterProvider was brought), a console exporter
//     ("console") and an optional Prometheus endpoint ([WithPrometheus], or
//     "prometheus" in OTEL_METRICS_EXPORTER, served at
//     OTEL_EXPORTER_PROMETHEUS_HOST:PORT, default localhost:9464);
//   - logs (the GenAI log events): a LoggerProvider with an OTLP exporter
//     behind a batch processor, OTEL_LOGS_EXPORTER (otlp, console, none)
//     deciding when set;
//   - the resource (service name, OTEL_RESOURCE_ATTRIBUTES), the global
//     providers and propagator, and a [Handler] registered with a Manager.
//
// A signal that the environment gives no endpoint while it gives one to
// another signal (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT alone, as Langfuse
// and Datadog document) is not exported over OTLP unless its
// OTEL_*_EXPORTER asks for it: it would go to localhost, where nothing
// listens. An exporter name Setup does not know is an error naming the
// variable.
//
// Setup does not connect: an unreachable collector never blocks or fails the
// application. Failed exports are dropped, counted and logged once; each
// export is bounded by the export timeout (the option, else
// OTEL_EXPORTER_OTLP_TIMEOUT and its per-signal variants, else
// DefaultExportTimeout).
//
// The returned shutdown flushes and stops everything Setup created. It is
// idempotent and, when ctx has no deadline, bounded by the longest export
// timeout (plus a second).
func Setup(ctx context.Context, opts SetupOptions) (shutdown func(context.Context) error, err error) {
	c := opts.config()
	s := &setup{c: &c, longest: c.exportTimeout}
	if err := s.build(ctx); err != nil {
		_ = s.close(ctx)
		return nil, err
	}

	var once sync.Once
	var shutdownErr error
	// One final export per signal, bounded by the export timeout, plus a
	// margin for the rest of the teardown.
	timeout := s.longest + time.Second
	return func(ctx context.Context) error {
		once.Do(func() {
			if _, ok := ctx.Deadline(); !ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			shutdownErr = s.close(ctx)
		})
		return shutdownErr
	}, nil
}

// ExportConfiguredFromEnv reports whether the environment asks for any
// export: an OTLP endpoint variable, or an OTEL_TRACES_EXPORTER,
// OTEL_METRICS_EXPORTER or OTEL_LOGS_EXPORTER naming an exporter (not
// "none"). Programs that export nothing unless asked (cmd/sage) call Setup
// only then.
func ExportConfiguredFromEnv() bool {
	if _, any := endpointFor(signal{}, &setupConfig{}, os.Getenv); any {
		return true
	}
	for _, sig := range allSignals {
		for _, v := range strings.Split(os.Getenv(sig.exporterVar()), ",") {
			if v = strings.ToLower(strings.TrimSpace(v)); v != "" && v != "none" {
				return true
			}
		}
	}
	return false
}

// setup is what Setup builds, step by step, and what its shutdown closes.
type setup struct {
	c       *setupConfig
	res     *resource.Resource
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	lp      otellog.LoggerProvider
	closers []func(context.Context) error
	longest time.Duration // the longest export timeout
}

// exporterNames are what each OTEL_*_EXPORTER variable takes.
var exporterNames = map[signal][]string{
	signalTraces:  {"otlp", "console", "none"},
	signalMetrics: {"otlp", "prometheus", "console", "none"},
	signalLogs:    {"otlp", "console", "none"},
}

func (s *setup) build(ctx context.Context) error {
	// A bad variable fails before anything is built.
	for _, sig := range allSignals {
		if _, _, err := exportersFromEnv(sig.exporterVar(), exporterNames[sig]...); err != nil {
			return err
		}
		if _, err := resolveTarget(sig, s.c, os.Getenv); err != nil {
			return err
		}
	}
	var err error
	if s.res, err = buildResource(ctx, s.c); err != nil {
		return err
	}
	if err := s.traces(ctx); err != nil {
		return err
	}
	if err := s.metrics(ctx); err != nil {
		return err
	}
	if err := s.logs(ctx); err != nil {
		return err
	}
	s.globals()
	return s.handler()
}

// close runs the closers concurrently: they are independent, and each
// final export then has the whole shutdown budget.
func (s *setup) close(ctx context.Context) error {
	errs := make([]error, len(s.closers))
	var wg sync.WaitGroup
	for i, f := range s.closers {
		wg.Go(func() { errs[i] = f(ctx) })
	}
	wg.Wait()
	s.closers = nil
	return errors.Join(errs...)
}

// wantOTLP decides whether sig goes over OTLP: what its OTEL_*_EXPORTER
// says when set (set, fromEnv), else byDefault, unless the environment
// configures endpoints for other signals only.
func (s *setup) wantOTLP(sig signal, set map[string]bool, fromEnv, byDefault bool) bool {
	if fromEnv {
		return set["otlp"]
	}
	if !byDefault {
		return false
	}
	applies, any := endpointFor(sig, s.c, os.Getenv)
	return applies || !any
}

// target resolves sig's OTLP target and notes its timeout.
func (s *setup) target(sig signal) (target, error) {
	t, err := resolveTarget(sig, s.c, os.Getenv)
	if err != nil {
		return target{}, err
	}
	s.longest = max(s.longest, t.timeout)
	return t, nil
}

// traces builds the TracerProvider, unless one was brought.
func (s *setup) traces(ctx context.Context) error {
	c := s.c
	if c.tp != nil {
		s.tp = c.tp
		return nil
	}
	set, fromEnv, err := exportersFromEnv(signalTraces.exporterVar(), exporterNames[signalTraces]...)
	if err != nil {
		return err
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(s.res)}
	var dropped *drops
	if s.wantOTLP(signalTraces, set, fromEnv, true) {
		t, err := s.target(signalTraces)
		if err != nil {
			return err
		}
		counter, err := newSpanExporter(ctx, c, t)
		if err != nil {
			return err
		}
		dropped = &counter.drops
		topts = append(topts, sdktrace.WithBatcher(counter, sdktrace.WithExportTimeout(t.timeout)))
	}
	if set["console"] {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(c.console))
		if err != nil {
			return fmt.Errorf("otel: console span exporter: %w", err)
		}
		topts = append(topts, sdktrace.WithSyncer(exp))
	}
	for _, sp := range c.processors {
		topts = append(topts, sdktrace.WithSpanProcessor(sp))
	}
	sdkTP := sdktrace.NewTracerProvider(topts...)
	s.tp = sdkTP
	s.closers = append(s.closers, dropped.closer("tracer provider", sdkTP.Shutdown,
		"otel: spans were dropped because the collector was unreachable"))
	return nil
}

// metrics builds the MeterProvider: a periodic OTLP reader, a console
// reader and the Prometheus endpoint, as configured. A brought
// MeterProvider wins for the handler; the readers are then still built and
// served.
func (s *setup) metrics(ctx context.Context) error {
	c := s.c
	set, fromEnv, err := exportersFromEnv(signalMetrics.exporterVar(), exporterNames[signalMetrics]...)
	if err != nil {
		return err
	}
	// OTLP metrics by default, unless the application brought its own
	// providers; OTEL_METRICS_EXPORTER decides when set.
	wantOTLP := c.mp == nil && s.wantOTLP(signalMetrics, set, fromEnv, c.tp == nil)
	promAddr := c.promAddr
	if promAddr == "" && c.promLn == nil && set["prometheus"] {
		promAddr = net.JoinHostPort(firstNonEmpty(os.Getenv("OTEL_EXPORTER_PROMETHEUS_HOST"), "localhost"),
			firstNonEmpty(os.Getenv("OTEL_EXPORTER_PROMETHEUS_PORT"), "9464"))
	}
	wantProm := promAddr != "" || c.promLn != nil

	var mopts []sdkmetric.Option
	var dropped *drops
	if wantOTLP {
		t, err := s.target(signalMetrics)
		if err != nil {
			return err
		}
		counter, err := newMetricExporter(ctx, c, t)
		if err != nil {
			return err
		}
		dropped = &counter.drops
		// OTEL_METRIC_EXPORT_INTERVAL is read by the reader.
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(counter,
			sdkmetric.WithTimeout(t.timeout))))
	}
	if set["console"] && c.mp == nil {
		exp, err := stdoutmetric.New(stdoutmetric.WithWriter(c.console))
		if err != nil {
			return fmt.Errorf("otel: console metric exporter: %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	var reg *prometheus.Registry
	if wantProm {
		reg = prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return fmt.Errorf("otel: prometheus exporter: %w", err)
		}
		mopts = append(mopts, sdkmetric.WithReader(exp))
	}
	s.mp = c.mp
	if len(mopts) == 0 {
		return nil
	}
	sdkMP := sdkmetric.NewMeterProvider(append(mopts, sdkmetric.WithResource(s.res))...)
	s.closers = append(s.closers, dropped.closer("meter provider", sdkMP.Shutdown,
		"otel: metric exports were dropped because they failed"))
	if s.mp == nil {
		s.mp = sdkMP
	}
	if wantProm {
		return s.servePrometheus(reg, promAddr)
	}
	return nil
}

// logs builds the LoggerProvider of the GenAI log events, unless one was
// brought: OTLP as the traces go (by default unless providers were
// brought), console, as OTEL_LOGS_EXPORTER says.
func (s *setup) logs(ctx context.Context) error {
	c := s.c
	if c.lp != nil {
		s.lp = c.lp
		return nil
	}
	set, fromEnv, err := exportersFromEnv(signalLogs.exporterVar(), exporterNames[signalLogs]...)
	if err != nil {
		return err
	}
	var lopts []sdklog.LoggerProviderOption
	var dropped *drops
	if s.wantOTLP(signalLogs, set, fromEnv, c.tp == nil && c.mp == nil) {
		t, err := s.target(signalLogs)
		if err != nil {
			return err
		}
		counter, err := newLogExporter(ctx, c, t)
		if err != nil {
			return err
		}
		dropped = &counter.drops
		lopts = append(lopts, sdklog.WithProcessor(sdklog.NewBatchProcessor(counter, sdklog.WithExportTimeout(t.timeout))))
	}
	if set["console"] {
		exp, err := stdoutlog.New(stdoutlog.WithWriter(c.console))
		if err != nil {
			return fmt.Errorf("otel: console log exporter: %w", err)
		}
		lopts = append(lopts, sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)))
	}
	if len(lopts) == 0 {
		return nil
	}
	lp := sdklog.NewLoggerProvider(append(lopts, sdklog.WithResource(s.res))...)
	s.lp = lp
	s.closers = append(s.closers, dropped.closer("logger provider", lp.Shutdown,
		"otel: log records were dropped because the collector was unreachable"))
	return nil
}

func (s *setup) servePrometheus(reg *prometheus.Registry, addr string) error {
	c := s.c
	ln := c.promLn
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("otel: prometheus listen %s: %w", addr, err)
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
	s.closers = append(s.closers, func(ctx context.Context) error {
		if err := srv.Shutdown(ctx); err != nil {
			return fmt.Errorf("otel: stop prometheus endpoint: %w", err)
		}
		return nil
	})
	return nil
}

func (s *setup) globals() {
	if s.c.noGlobal {
		return
	}
	otelapi.SetTracerProvider(s.tp)
	if s.mp != nil {
		otelapi.SetMeterProvider(s.mp)
	}
	if s.lp != nil {
		logglobal.SetLoggerProvider(s.lp)
	}
	otelapi.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}))
}

func (s *setup) handler() error {
	if s.c.manager == nil {
		return nil
	}
	hopts := s.c.handler
	hopts.TracerProvider = s.tp
	if s.mp != nil {
		hopts.MeterProvider = s.mp
	}
	if s.lp != nil {
		hopts.LoggerProvider = s.lp
	} else if s.c.noGlobal {
		hopts.LoggerProvider = lognoop.NewLoggerProvider() // no logs were asked for
	}
	h, err := NewHandler(hopts)
	if err != nil {
		return err
	}
	s.c.manager.Register(h)
	return nil
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

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
