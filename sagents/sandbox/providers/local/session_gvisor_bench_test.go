//go:build linux

package local

import (
	"os"
	"testing"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
)

// requireGvisorBench fails b (or skips it, opted in) unless isolation
// gvisor can run: root and runsc.
func requireGvisorBench(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(b, "root (isolation gvisor runs runsc as root)", "run the benchmarks as root")
	}
	testenv.Command(b, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
}

// newGvisorSessionBench is a sandbox with isolation gvisor and its
// default, the session sandbox.
func newGvisorSessionBench(b *testing.B) *Sandbox {
	b.Helper()
	requireGvisorBench(b)
	return newSessionBenchIso(b, sandbox.IsolationGvisor, benchSupervisor(b))
}

// BenchmarkGvisorSessionExecTrue is ExecuteCommand of "true" in a warm
// gVisor session sandbox; BenchmarkGvisorSessionExecTruePaired measures
// it against bare bwrap and a runsc sandbox per command.
func BenchmarkGvisorSessionExecTrue(b *testing.B) { benchWarmExecTrue(b, newGvisorSessionBench(b)) }

// BenchmarkGvisorSessionFirstExecTrue is the first command of a new
// gVisor session sandbox: runsc's start and "true". Stopping the session
// is not timed.
func BenchmarkGvisorSessionFirstExecTrue(b *testing.B) {
	benchFirstExecTrue(b, newGvisorSessionBench(b))
}

// gvisorBaselines are the sandboxes of the cold starts the gVisor
// benchmarks are paired with: bwrap's and gVisor's sandbox per command
// (bare bwrap runs BenchmarkBareBwrapTrue's command from the first; the
// second is BenchmarkGvisorExecTrue's).
func gvisorBaselines(b *testing.B) (bw, g *Sandbox) {
	requireGvisorBench(b)
	return newFreshBench(b, ""), newFreshBench(b, sandbox.IsolationGvisor)
}

// BenchmarkGvisorExecTruePaired alternates, in one loop, a runsc sandbox
// per command running "true" and its baseline: /bare bare bwrap, /bwrap
// local mode's bwrap sandbox per command (BenchmarkLocalExecTrue's).
// x-baseline is gVisor's median over the baseline's.
func BenchmarkGvisorExecTruePaired(b *testing.B) {
	bw, g := gvisorBaselines(b)
	b.Run("bare", func(b *testing.B) { benchpair.Run(b, bareTrue(b, bw), func() { execTrue(b, g) }) })
	b.Run("bwrap", func(b *testing.B) { benchpair.Run(b, func() { execTrue(b, bw) }, func() { execTrue(b, g) }) })
}

// BenchmarkGvisorSessionExecTruePaired alternates a command of a warm
// gVisor session sandbox with a cold start: /bare bare bwrap, /gvisor a
// runsc sandbox per command. Both are cross-kind ratios (a warm session's
// command against a sandbox started for the command): the session's
// saving (make bench's goal for /gvisor: <= 0.3).
func BenchmarkGvisorSessionExecTruePaired(b *testing.B) {
	bw, g := gvisorBaselines(b)
	s := newGvisorSessionBench(b)
	execTrue(b, s) // the session's start is not timed
	b.Run("bare", func(b *testing.B) { benchpair.Run(b, bareTrue(b, bw), func() { execTrue(b, s) }) })
	b.Run("gvisor", func(b *testing.B) { benchpair.Run(b, func() { execTrue(b, g) }, func() { execTrue(b, s) }) })
}

// BenchmarkGvisorSessionFirstExecTruePaired alternates the first command
// of a new gVisor session sandbox (runsc's start and "true"; stopping
// the session is not timed) with /bare bare bwrap and /gvisor a runsc
// sandbox per command.
func BenchmarkGvisorSessionFirstExecTruePaired(b *testing.B) {
	bw, g := gvisorBaselines(b)
	s := newGvisorSessionBench(b)
	b.Run("bare", func(b *testing.B) { benchpair.Timed(b, benchpair.Measure(bareTrue(b, bw)), firstExec(b, s)) })
	b.Run("gvisor", func(b *testing.B) {
		benchpair.Timed(b, benchpair.Measure(func() { execTrue(b, g) }), firstExec(b, s))
	})
}
