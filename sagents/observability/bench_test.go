package observability_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/sage-go/sage/sagents/observability"
)

func benchDispatch(b *testing.B, m *observability.Manager) {
	ctx := context.Background()
	req := observability.LLMRequest{Model: "gpt-4o", ModelType: observability.ModelStandard}
	resp := observability.LLMResponse{Usage: observability.Usage{InputTokens: 10, OutputTokens: 5}}
	b.ReportAllocs()
	for b.Loop() {
		c := m.LLMStart(ctx, req)
		m.LLMEnd(c, resp)
	}
}

// BenchmarkDispatch measures one llm start/end pair through the Manager.
func BenchmarkDispatch(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.Run("handlers=0", func(b *testing.B) { benchDispatch(b, observability.New(observability.Options{Logger: quiet})) })
	b.Run("handlers=1-noop", func(b *testing.B) {
		benchDispatch(b, observability.New(observability.Options{Logger: quiet, Handlers: []observability.Handler{observability.Base{}}}))
	})
	b.Run("handlers=nil-manager", func(b *testing.B) { benchDispatch(b, nil) })
}
