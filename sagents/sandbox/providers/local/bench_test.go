//go:build linux

package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

// BenchmarkBareBwrapTrue runs the same bwrap argument list as local mode,
// directly with os/exec, with /bin/true as the command: the baseline.
func BenchmarkBareBwrapTrue(b *testing.B) {
	s := newLocal(b, nil)
	for b.Loop() {
		if err := s.Driver().(*local.Sandbox).BwrapCommand("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalExecTrue is Handle.ExecuteCommand of "true" with a fresh
// sandbox per command (fresh_per_command: true; the session sandbox, the
// default, has BenchmarkSessionExecTrue).
func BenchmarkLocalExecTrue(b *testing.B) {
	benchExecuteTrue(b, newLocal(b, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh }))
}

// benchExecuteTrue times Handle.ExecuteCommand of "true" in s.
func benchExecuteTrue(b *testing.B, s *sandbox.Sandbox) {
	ctx := context.Background()
	for b.Loop() {
		res, err := s.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
	}
}

var _ = local.DefaultPidsLimit

// BenchmarkLocalExecTrueCPUBudget is BenchmarkLocalExecTrue with a CPU
// time limit: each command makes, joins and removes its own CPU cgroup
// and runs a watchdog (root with writable cgroups only).
func BenchmarkLocalExecTrueCPUBudget(b *testing.B) {
	s := newLocal(b, func(c *sandbox.Config) { c.Local.CPUTimeLimit = 10 * time.Second; c.Local.FreshPerCommand = &fresh })
	ctx := context.Background()
	for b.Loop() {
		res, err := s.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
	}
}
