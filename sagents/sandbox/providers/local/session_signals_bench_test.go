//go:build linux

package local

import (
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
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

// BenchmarkSessionExecTrueRelayPaired alternates, in one loop, "true" in
// two warm session sandboxes served by cmd/sage-supervisor, one with the
// signal relay (--signals on, the default) and one without (off: signals
// scoped to each command's domain, as #31 left them), so that the load
// swings hit both alike. It reports each side's median and on/off, the
// relay's cost on a command (a filter per command's domain, made ahead;
// the listener's end).
func BenchmarkSessionExecTrueRelayPaired(b *testing.B) {
	requireRelayBench(b)
	on := newSessionBench(b)
	execTrue(b, on)
	commandSignals = "off"
	off := newSessionBench(b)
	execTrue(b, off) // launched now, without the relay
	commandSignals = "on"
	var ton, toff []time.Duration
	timeOn := func() {
		start := time.Now()
		execTrue(b, on)
		ton = append(ton, time.Since(start))
	}
	timeOff := func() {
		start := time.Now()
		execTrue(b, off)
		toff = append(toff, time.Since(start))
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			timeOn()
			timeOff()
		} else {
			timeOff()
			timeOn()
		}
		i++
	}
	mon, moff := median(ton), median(toff)
	b.ReportMetric(float64(mon), "on-median-ns")
	b.ReportMetric(float64(moff), "off-median-ns")
	b.ReportMetric(float64(mon)/float64(max(moff, 1)), "on/off")
}

// requireRelayBench fails b where the kernel has no Landlock signal
// scopes: there is no relay to measure.
func requireRelayBench(b *testing.B) {
	b.Helper()
	if supervisor.LandlockABI() < supervisor.LandlockSignalABI {
		b.Fatalf("Landlock ABI %d: no domains, no relay (Linux 6.12+)", supervisor.LandlockABI())
	}
}
