//go:build linux

package local

import (
	"context"
	"os"
	"testing"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newGvisorSessionBench is a sandbox with isolation gvisor and its
// default, the session sandbox.
func newGvisorSessionBench(b *testing.B) *Sandbox {
	b.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(b, "root (isolation gvisor runs runsc as root)", "run the benchmarks as root")
	}
	testenv.Command(b, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(b), RuntimeDir: sandboxtest.TempDir(b)}
	cfg.Local.Isolation.Linux = sandbox.IsolationGvisor
	s, err := NewWithOptions(context.Background(), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	if !s.SessionEnabled() {
		b.Fatal("isolation gvisor without fresh_per_command should run a session sandbox")
	}
	return s
}

// BenchmarkGvisorSessionExecTrue is ExecuteCommand of "true" in a warm
// gVisor session sandbox; make bench prints it against
// BenchmarkBareBwrapTrue and BenchmarkGvisorExecTrue (a runsc sandbox per
// command) from the same run.
func BenchmarkGvisorSessionExecTrue(b *testing.B) {
	s := newGvisorSessionBench(b)
	execTrue(b, s)
	for b.Loop() {
		execTrue(b, s)
	}
}

// BenchmarkGvisorSessionFirstExecTrue is the first command of a new
// gVisor session sandbox: runsc's start and "true". Stopping the session
// is not timed.
func BenchmarkGvisorSessionFirstExecTrue(b *testing.B) {
	s := newGvisorSessionBench(b)
	for b.Loop() {
		execTrue(b, s)
		b.StopTimer()
		s.dropSession()
		b.StartTimer()
	}
}
