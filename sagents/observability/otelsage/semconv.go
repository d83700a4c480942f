package otelsage

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sage-go/sage/sagents/observability"
)

// SemconvOptInEnv is the environment variable the GenAI conventions name
// for choosing their version: a comma-separated list in which
// [LatestExperimental] asks for the latest development conventions instead
// of the pinned release ([SchemaURL]).
const SemconvOptInEnv = "OTEL_SEMCONV_STABILITY_OPT_IN"

// LatestExperimental is the [SemconvOptInEnv] value that selects the
// latest development GenAI conventions.
const LatestExperimental = "gen_ai_latest_experimental"

// Metric names of the latest development GenAI conventions. They replace
// the release's single gen_ai.client.token.usage histogram: counters per
// token category (the cost proxy, each with gen_ai.token.modality) and
// per-operation histograms for percentiles.
const (
	MetricUsageInputTokens      = "gen_ai.client.inference.usage.input_tokens"
	MetricUsageOutputTokens     = "gen_ai.client.inference.usage.output_tokens"
	MetricUsageCacheReadTokens  = "gen_ai.client.inference.usage.cache_read.input_tokens"
	MetricUsageCacheWriteTokens = "gen_ai.client.inference.usage.cache_write.input_tokens"
	MetricUsageReasoningTokens  = "gen_ai.client.inference.usage.reasoning.output_tokens"
	MetricOperationInputTokens  = "gen_ai.client.inference.operation.input_tokens"
	MetricOperationOutputTokens = "gen_ai.client.inference.operation.output_tokens"
)

// AttrTokenModality is the modality of counted tokens: OpenAI-compatible
// usage reports no modality breakdown, so it is "unknown".
const AttrTokenModality = attribute.Key("gen_ai.token.modality")

// LatestExperimentalFromEnv reports whether [SemconvOptInEnv] lists
// [LatestExperimental].
func LatestExperimentalFromEnv() bool {
	return optsIn(os.Getenv(SemconvOptInEnv), LatestExperimental)
}

// optsIn reports whether the comma-separated list v holds want (values
// are trimmed and compared without case, as the SDKs do).
func optsIn(v, want string) bool {
	for _, f := range strings.Split(v, ",") {
		if strings.EqualFold(strings.TrimSpace(f), want) {
			return true
		}
	}
	return false
}

// tokenMetrics records token usage in one version of the conventions.
type tokenMetrics interface {
	record(ctx context.Context, set attribute.Set, u observability.Usage, known, embeddings bool)
}

// releaseTokens is gen_ai.client.token.usage with gen_ai.token.type, as
// the pinned release defines it; unknown usage is not recorded.
type releaseTokens struct{ h metric.Int64Histogram }

func newReleaseTokens(meter metric.Meter) (tokenMetrics, error) {
	h, err := meter.Int64Histogram("gen_ai.client.token.usage",
		metric.WithDescription("Number of input and output tokens used."), metric.WithUnit("{token}"),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otel: create token histogram: %w", err)
	}
	return releaseTokens{h}, nil
}

func (r releaseTokens) record(ctx context.Context, set attribute.Set, u observability.Usage, known, embeddings bool) {
	if !known {
		return
	}
	r.h.Record(ctx, u.InputTokens, metric.WithAttributeSet(set), metric.WithAttributes(AttrTokenType.String("input")))
	if !embeddings {
		r.h.Record(ctx, u.OutputTokens, metric.WithAttributeSet(set), metric.WithAttributes(AttrTokenType.String("output")))
	}
}

// latestTokens is the development conventions' token metrics. Counters are
// recorded for every finished operation (0 when the server sent no usage,
// as those conventions ask); the per-operation histograms only when the
// usage is known.
type latestTokens struct {
	in, out, cacheRead, cacheWrite, reasoning metric.Int64Counter
	opIn, opOut                               metric.Int64Histogram
}

func newLatestTokens(meter metric.Meter) (tokenMetrics, error) {
	var t latestTokens
	counters := []struct {
		dst         *metric.Int64Counter
		name, brief string
	}{
		{&t.in, MetricUsageInputTokens, "Input (prompt) tokens used, including cached tokens."},
		{&t.out, MetricUsageOutputTokens, "Output (completion) tokens used, including reasoning tokens."},
		{&t.cacheRead, MetricUsageCacheReadTokens, "Input tokens served from a provider-managed cache."},
		{&t.cacheWrite, MetricUsageCacheWriteTokens, "Input tokens written to a provider-managed cache."},
		{&t.reasoning, MetricUsageReasoningTokens, "Output tokens used for reasoning."},
	}
	for _, c := range counters {
		var err error
		if *c.dst, err = meter.Int64Counter(c.name, metric.WithDescription(c.brief), metric.WithUnit("{token}")); err != nil {
			return nil, fmt.Errorf("otel: create %s: %w", c.name, err)
		}
	}
	hists := []struct {
		dst         *metric.Int64Histogram
		name, brief string
	}{
		{&t.opIn, MetricOperationInputTokens, "Input (prompt) tokens used per inference operation."},
		{&t.opOut, MetricOperationOutputTokens, "Output (completion) tokens used per inference operation."},
	}
	for _, h := range hists {
		var err error
		if *h.dst, err = meter.Int64Histogram(h.name, metric.WithDescription(h.brief), metric.WithUnit("{token}"),
			metric.WithExplicitBucketBoundaries(tokenBuckets...)); err != nil {
			return nil, fmt.Errorf("otel: create %s: %w", h.name, err)
		}
	}
	return t, nil
}

func (t latestTokens) record(ctx context.Context, set attribute.Set, u observability.Usage, known, embeddings bool) {
	opts := []metric.AddOption{metric.WithAttributeSet(set), metric.WithAttributes(AttrTokenModality.String("unknown"))}
	t.in.Add(ctx, u.InputTokens, opts...)
	t.cacheRead.Add(ctx, u.CacheReadInputTokens, opts...)
	t.cacheWrite.Add(ctx, u.CacheCreationInputTokens, opts...)
	if !embeddings {
		t.out.Add(ctx, u.OutputTokens, opts...)
		t.reasoning.Add(ctx, u.ReasoningTokens, opts...)
	}
	if known {
		t.opIn.Record(ctx, u.InputTokens, metric.WithAttributeSet(set))
		if !embeddings {
			t.opOut.Record(ctx, u.OutputTokens, metric.WithAttributeSet(set))
		}
	}
}
