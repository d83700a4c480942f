//go:build linux

package local

import (
	"testing"
	"time"
)

// BenchmarkSessionExecTruePaired alternates, in one loop, one bare bwrap
// "true" (the argument list of BenchmarkBareBwrapTrue) and one "true" in
// a warm session sandbox (cmd/sage-supervisor), each timed on its own, so
// that the machine's load swings hit both alike; the order flips every
// iteration. It reports each side's median and warm/bare, the ratio of
// the medians (goal: <= 0.3). Each command of the session carries the
// signal relay's seccomp filter (supervisor/signals_linux.go) where there
// are Landlock domains.
func BenchmarkSessionExecTruePaired(b *testing.B) {
	s := newSessionBench(b)
	execTrue(b, s) // the session sandbox runs
	var bare, warm []time.Duration
	timeBare := func() {
		start := time.Now()
		if err := s.BwrapCommand("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(start))
	}
	timeWarm := func() {
		start := time.Now()
		execTrue(b, s)
		warm = append(warm, time.Since(start))
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			timeBare()
			timeWarm()
		} else {
			timeWarm()
			timeBare()
		}
		i++
	}
	mb, mw := median(bare), median(warm)
	b.ReportMetric(float64(mb), "bare-median-ns")
	b.ReportMetric(float64(mw), "warm-median-ns")
	b.ReportMetric(float64(mw)/float64(max(mb, 1)), "warm/bare")
}
