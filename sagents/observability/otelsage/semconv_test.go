package otelsage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sage-go/sage/sagents/observability"
	sageotel "github.com/sage-go/sage/sagents/observability/otelsage"
)

// tokenMetrics collects every int64 metric by name: the sum of each
// counter or histogram, and the gen_ai.token.* attributes seen.
func tokenMetrics(t *testing.T, f *fixture) (sums map[string]int64, attrs map[string][]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	sums, attrs = map[string]int64{}, map[string][]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sums[m.Name] += dp.Value
					if v, ok := dp.Attributes.Value(sageotel.AttrTokenModality); ok {
						attrs[m.Name] = append(attrs[m.Name], "modality="+v.AsString())
					}
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					sums[m.Name] += dp.Sum
					if v, ok := dp.Attributes.Value(sageotel.AttrTokenType); ok {
						attrs[m.Name] = append(attrs[m.Name], "type="+v.AsString())
					}
				}
			}
		}
	}
	return sums, attrs
}

// TestSemconvOptIn: by default the pinned release's token histogram is
// recorded; OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (in a
// list, any case) records the development conventions' counters and
// per-operation histograms instead, never both.
func TestSemconvOptIn(t *testing.T) {
	const old = "gen_ai.client.token.usage"
	for _, tc := range []struct {
		env    string
		latest bool
	}{
		{"", false},
		{"http", false},
		{"http, GEN_AI_LATEST_EXPERIMENTAL", true},
		{"gen_ai_latest_experimental", true},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(sageotel.SemconvOptInEnv, tc.env)
			assert.Equal(t, tc.latest, sageotel.LatestExperimentalFromEnv())
			f := newFixture(t, nil)
			session(f.m, "s") // 100 input (64 cached), 20 output (5 reasoning)
			sums, attrs := tokenMetrics(t, f)
			if !tc.latest {
				assert.Equal(t, int64(120), sums[old])
				assert.ElementsMatch(t, []string{"type=input", "type=output"}, attrs[old])
				assert.NotContains(t, sums, sageotel.MetricUsageInputTokens)
				return
			}
			assert.NotContains(t, sums, old)
			assert.Equal(t, map[string]int64{
				sageotel.MetricUsageInputTokens:      100,
				sageotel.MetricUsageOutputTokens:     20,
				sageotel.MetricUsageCacheReadTokens:  64,
				sageotel.MetricUsageCacheWriteTokens: 0,
				sageotel.MetricUsageReasoningTokens:  5,
				sageotel.MetricOperationInputTokens:  100,
				sageotel.MetricOperationOutputTokens: 20,
			}, sums)
			assert.Equal(t, []string{"modality=unknown"}, attrs[sageotel.MetricUsageInputTokens])
		})
	}
}

// TestSemconvOptInFailedCall: in the development conventions a failed
// call counts (0 tokens, modality unknown) but adds no histogram point;
// the release records nothing for it. The option overrides the env.
func TestSemconvOptInFailedCall(t *testing.T) {
	t.Setenv(sageotel.SemconvOptInEnv, "")
	for _, latest := range []bool{false, true} {
		f := newFixture(t, nil, sageotel.HandlerOptions{LatestExperimental: new(latest)})
		ctx := f.m.LLMStart(context.Background(), observability.LLMRequest{Model: "m"})
		f.m.LLMError(ctx, errors.New("boom"))
		sums, _ := tokenMetrics(t, f)
		if !latest {
			assert.Empty(t, sums)
			continue
		}
		assert.Equal(t, map[string]int64{
			sageotel.MetricUsageInputTokens: 0, sageotel.MetricUsageOutputTokens: 0,
			sageotel.MetricUsageCacheReadTokens: 0, sageotel.MetricUsageCacheWriteTokens: 0,
			sageotel.MetricUsageReasoningTokens: 0,
		}, sums)
	}
}
