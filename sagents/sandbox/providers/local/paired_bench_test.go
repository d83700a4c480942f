//go:build linux

package local

import (
	"context"
	"testing"

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
	benchpair.Run(b, bareTrue(b, s), func() { execTrue(b, s) })
}

// BenchmarkSessionExecTruePaired is BenchmarkSessionExecTrue (a warm
// session sandbox) paired with bare bwrap in one loop (goal: x-baseline
// <= 0.3).
func BenchmarkSessionExecTruePaired(b *testing.B) {
	s := newSessionBench(b)
	execTrue(b, s) // the session's start is not timed
	benchpair.Run(b, bareTrue(b, s), func() { execTrue(b, s) })
}
