//go:build linux

package local

import (
	"context"
	"testing"
	"time"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

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
	s := newFreshBench(b, "")
	benchpair.Run(b, bareTrue(b, s), func() { execTrue(b, s) })
}

// newFreshBench is a sandbox of isolation iso ("": bwrap) with a sandbox
// per command (fresh_per_command: true), closed with b.
func newFreshBench(b *testing.B, iso string) *Sandbox {
	b.Helper()
	fresh := true
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(b), RuntimeDir: sandboxtest.TempDir(b)}
	cfg.Local.Isolation.Linux = iso
	cfg.Local.FreshPerCommand = &fresh
	s, err := NewWithOptions(context.Background(), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	if s.SessionEnabled() {
		b.Fatal("fresh_per_command: true runs a session sandbox")
	}
	return s
}

// BenchmarkSessionExecTruePaired is BenchmarkSessionExecTrue (a warm
// session sandbox) paired with bare bwrap in one loop (goal: x-baseline
// <= 0.3).
func BenchmarkSessionExecTruePaired(b *testing.B) {
	s := newSessionBench(b)
	execTrue(b, s) // the session's start is not timed
	benchpair.Run(b, bareTrue(b, s), func() { execTrue(b, s) })
}

// BenchmarkSessionFirstExecTruePrestartedPaired alternates bare bwrap and
// BenchmarkSessionFirstExecTruePrestarted's command: the first of a
// session sandbox that SessionOptions.Prestart started when the Sandbox
// opened (opening it, waiting for the supervisor and closing it are not
// timed). x-baseline is that command's median over bare bwrap's.
func BenchmarkSessionFirstExecTruePrestartedPaired(b *testing.B) {
	bare := benchpair.Measure(bareTrue(b, newFreshBench(b, "")))
	benchpair.Timed(b, bare, func() time.Duration {
		s, _ := openPrestarted(b)
		defer s.Close(context.Background())
		return benchpair.Measure(func() { execTrue(b, s) })()
	})
}
