// Package benchpair measures a candidate against its baseline in one
// benchmark loop, alternating the two and flipping their order every
// iteration, so that a shared machine's load swings hit both alike (two
// benchmarks run one after the other, as go test -count runs them, are
// minutes apart). The ratios make bench checks come from it.
package benchpair

import (
	"slices"
	"testing"
	"time"
)

// Run times baseline and candidate alternately in b's loop, each on its
// own, and reports each side's median ("baseline-median-ns",
// "median-ns") and their ratio, "x-baseline". It returns the samples
// for benchmarks that report more.
func Run(b *testing.B, baseline, candidate func()) (base, cand []time.Duration) {
	timed := func(f func(), into *[]time.Duration) {
		start := time.Now()
		f()
		*into = append(*into, time.Since(start))
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			timed(baseline, &base)
			timed(candidate, &cand)
		} else {
			timed(candidate, &cand)
			timed(baseline, &base)
		}
	}
	mb, mc := Median(base), Median(cand)
	b.ReportMetric(float64(mb), "baseline-median-ns")
	b.ReportMetric(float64(mc), "median-ns")
	b.ReportMetric(float64(mc)/float64(max(mb, 1)), "x-baseline")
	return base, cand
}

// Median is the median of d (0 for none).
func Median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	if n := len(d); n%2 == 0 {
		return (d[n/2-1] + d[n/2]) / 2
	}
	return d[len(d)/2]
}

// Mean is the mean of d (0 for none).
func Mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return sum / time.Duration(max(len(d), 1))
}
