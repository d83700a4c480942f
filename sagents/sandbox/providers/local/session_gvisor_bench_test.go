//go:build linux

package local

import (
	"os"
	"testing"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
)

// newGvisorSessionBench is a sandbox with isolation gvisor and its
// default, the session sandbox.
func newGvisorSessionBench(b *testing.B) *Sandbox {
	b.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(b, "root (isolation gvisor runs runsc as root)", "run the benchmarks as root")
	}
	testenv.Command(b, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
	return newSessionBenchIso(b, sandbox.IsolationGvisor, benchSupervisor(b))
}

// BenchmarkGvisorSessionExecTrue is ExecuteCommand of "true" in a warm
// gVisor session sandbox; make bench prints it against
// BenchmarkBareBwrapTrue and BenchmarkGvisorExecTrue (a runsc sandbox per
// command) from the same run.
func BenchmarkGvisorSessionExecTrue(b *testing.B) { benchWarmExecTrue(b, newGvisorSessionBench(b)) }

// BenchmarkGvisorSessionFirstExecTrue is the first command of a new
// gVisor session sandbox: runsc's start and "true". Stopping the session
// is not timed.
func BenchmarkGvisorSessionFirstExecTrue(b *testing.B) {
	benchFirstExecTrue(b, newGvisorSessionBench(b))
}
