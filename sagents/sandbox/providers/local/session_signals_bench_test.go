//go:build linux

package local

import (
	"testing"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// BenchmarkSessionExecTrueRelayPaired alternates, in one loop, "true" in
// two warm session sandboxes served by cmd/sage-supervisor, one with the
// signal relay (--signals on, the default) and one without (off: signals
// scoped to each command's domain, as #31 left them), paired in one
// loop (benchpair.Run: off is the baseline). x-baseline is the relay's cost
// on a command (a filter per command's domain, made ahead;
// the listener's end).
func BenchmarkSessionExecTrueRelayPaired(b *testing.B) {
	requireRelayBench(b)
	on := newSessionBench(b)
	execTrue(b, on)
	commandSignals = "off"
	off := newSessionBench(b)
	execTrue(b, off) // launched now, without the relay
	commandSignals = "on"
	benchpair.Run(b, func() { execTrue(b, off) }, func() { execTrue(b, on) })
}

// requireRelayBench fails b where the kernel has no Landlock signal
// scopes: there is no relay to measure.
func requireRelayBench(b *testing.B) {
	b.Helper()
	if supervisor.LandlockABI() < supervisor.LandlockSignalABI {
		b.Fatalf("Landlock ABI %d: no domains, no relay (Linux 6.12+)", supervisor.LandlockABI())
	}
}
