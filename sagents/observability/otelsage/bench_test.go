package otelsage_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/internal/benchpair"
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

// BenchmarkSpanPairRatio alternates, in one loop (benchpair), chunks of
// 256 tool span pairs through the raw tracer (the baseline) and through
// the handler called directly (/handler) or the full Manager dispatch
// (/manager); x-baseline is the ratio of the chunks' medians (make bench's
// goal for /handler: <= 1.2).
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
	raw := func() {
		for range chunk {
			rawToolSpan(ctx, tr)
		}
	}
	b.Run("handler", func(b *testing.B) {
		benchpair.Run(b, raw, func() {
			for range chunk {
				c, _ := h.ToolStart(ctx, call)
				_ = h.ToolEnd(c, observability.ToolResult{})
			}
		})
	})
	b.Run("manager", func(b *testing.B) {
		benchpair.Run(b, raw, func() {
			for range chunk {
				c := m.ToolStart(ctx, call)
				m.ToolEnd(c, observability.ToolResult{})
			}
		})
	})
}
