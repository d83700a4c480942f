//go:build linux

package local

import (
	"context"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// benchPaired alternates baseline and candidate in one loop, each timed
// on its own and the order flipped every iteration, so that the machine's
// load swings hit both alike (the ratios make bench checks its targets
// on). It reports each side's median and x-baseline, the ratio of the
// medians.
func benchPaired(b *testing.B, baseline, candidate func()) {
	var base, cand []time.Duration
	timed := func(f func(), into *[]time.Duration) {
		start := time.Now()
		f()
		*into = append(*into, time.Since(start))
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			timed(baseline, &base)
			timed(candidate, &cand)
		} else {
			timed(candidate, &cand)
			timed(baseline, &base)
		}
		i++
	}
	mb, mc := median(base), median(cand)
	b.ReportMetric(float64(mb), "baseline-median-ns")
	b.ReportMetric(float64(mc), "median-ns")
	b.ReportMetric(float64(mc)/float64(max(mb, 1)), "x-baseline")
}

// bareTrue is the baseline of local mode: bwrap with the sandbox's own
// argument list running /bin/true (BenchmarkBareBwrapTrue's command).
func bareTrue(b *testing.B, s *Sandbox) func() {
	return func() {
		if err := s.BwrapCommand("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalExecTruePaired is BenchmarkLocalExecTrue (a fresh sandbox
// per command) paired with bare bwrap in one loop (goal: x-baseline <= 1.3).
func BenchmarkLocalExecTruePaired(b *testing.B) {
	fresh := true
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(b), RuntimeDir: sandboxtest.TempDir(b)}
	cfg.Local.FreshPerCommand = &fresh
	s, err := NewWithOptions(context.Background(), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	if s.SessionEnabled() {
		b.Fatal("fresh_per_command: true runs a session sandbox")
	}
	benchPaired(b, bareTrue(b, s), func() { execTrue(b, s) })
}

// BenchmarkSessionExecTruePaired is BenchmarkSessionExecTrue (a warm
// session sandbox) paired with bare bwrap in one loop (goal: x-baseline
// <= 0.3).
func BenchmarkSessionExecTruePaired(b *testing.B) {
	s := newSessionBench(b)
	execTrue(b, s) // the session's start is not timed
	benchPaired(b, bareTrue(b, s), func() { execTrue(b, s) })
}
