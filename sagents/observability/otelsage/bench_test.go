package otelsage_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

// discard is a span processor that keeps nothing, so the benchmarks measure
// span creation rather than export.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

func benchProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
}

var call = observability.ToolCall{Name: "shell", CallID: "call-1", Arguments: `{"cmd":"ls"}`}

// rawToolSpan makes by hand the span the handler makes for a tool call.
func rawToolSpan(ctx context.Context, tr trace.Tracer) {
	_, span := tr.Start(ctx, "execute_tool "+call.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", call.Name),
			attribute.String("gen_ai.tool.type", "function"),
			attribute.String("gen_ai.tool.call.id", call.CallID)))
	span.End()
}

// raw does by hand what the handler does for a tool call.
func raw(b *testing.B, tp trace.TracerProvider) {
	tr := tp.Tracer("raw")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rawToolSpan(ctx, tr)
	}
}

func viaHandler(b *testing.B, tp trace.TracerProvider) {
	h, err := sageotel.NewHandler(sageotel.HandlerOptions{TracerProvider: tp, MeterProvider: noop.NewMeterProvider(), CaptureContent: new(false)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, _ := h.ToolStart(ctx, call)
		_ = h.ToolEnd(c, observability.ToolResult{})
	}
}

func viaManager(b *testing.B, tp trace.TracerProvider) {
	h, err := sageotel.NewHandler(sageotel.HandlerOptions{TracerProvider: tp, MeterProvider: noop.NewMeterProvider(), CaptureContent: new(false)})
	if err != nil {
		b.Fatal(err)
	}
	m := observability.New(observability.Options{Handlers: []observability.Handler{h}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := m.ToolStart(ctx, call)
		m.ToolEnd(c, observability.ToolResult{})
	}
}

// BenchmarkSpanPair: one tool span start/end, raw tracer vs the handler
// called directly vs the full Manager dispatch.
func BenchmarkSpanPair(b *testing.B) {
	tp := benchProvider()
	b.Run("raw", func(b *testing.B) { raw(b, tp) })
	b.Run("handler", func(b *testing.B) { viaHandler(b, tp) })
	b.Run("manager", func(b *testing.B) { viaManager(b, tp) })
}

// BenchmarkSpanPairRatio interleaves the three variants in chunks within one
// benchmark, so that they share the machine's state, and reports the ratios.
func BenchmarkSpanPairRatio(b *testing.B) {
	tp := benchProvider()
	tr := tp.Tracer("raw")
	h, err := sageotel.NewHandler(sageotel.HandlerOptions{TracerProvider: tp, MeterProvider: noop.NewMeterProvider(), CaptureContent: new(false)})
	if err != nil {
		b.Fatal(err)
	}
	m := observability.New(observability.Options{Handlers: []observability.Handler{h}})
	ctx := context.Background()
	const chunk = 256
	var rawT, hT, mT time.Duration
	pairs := 0
	for pairs < b.N {
		t0 := time.Now()
		for range chunk {
			rawToolSpan(ctx, tr)
		}
		t1 := time.Now()
		for range chunk {
			c, _ := h.ToolStart(ctx, call)
			_ = h.ToolEnd(c, observability.ToolResult{})
		}
		t2 := time.Now()
		for range chunk {
			c := m.ToolStart(ctx, call)
			m.ToolEnd(c, observability.ToolResult{})
		}
		t3 := time.Now()
		rawT += t1.Sub(t0)
		hT += t2.Sub(t1)
		mT += t3.Sub(t2)
		pairs += chunk
	}
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(pairs), "raw-ns/pair")
	b.ReportMetric(float64(hT)/float64(rawT), "handler/raw")
	b.ReportMetric(float64(mT)/float64(rawT), "manager/raw")
}
