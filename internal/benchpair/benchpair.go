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
	return Timed(b, Measure(baseline), Measure(candidate))
}

// Measure is f as Timed takes it: each call returns how long f took.
func Measure(f func()) func() time.Duration {
	return func() time.Duration {
		start := time.Now()
		f()
		return time.Since(start)
	}
}

// Timed is Run for operations that time themselves: each call returns
// the duration of its measured part, leaving out the setup and cleanup
// around it (a warm pool's refill, removing the container it started).
func Timed(b *testing.B, baseline, candidate func() time.Duration) (base, cand []time.Duration) {
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			base = append(base, baseline())
			cand = append(cand, candidate())
		} else {
			cand = append(cand, candidate())
			base = append(base, baseline())
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
