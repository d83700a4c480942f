package opensandbox_test

import (
	"context"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
)

func benchSandbox(b *testing.B) *opensandbox.Sandbox {
	srv := opensandboxtest.New(b)
	s, err := opensandbox.Open(context.Background(), config(srv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// BenchmarkBaselineExecdTrue is one bare execd command round trip.
func BenchmarkBaselineExecdTrue(b *testing.B) {
	s := benchSandbox(b)
	ctx := context.Background()
	for b.Loop() {
		if err := s.Execd().RunCommand(ctx, opensandbox.RunCommandRequest{Command: "true"}, func(opensandbox.Event) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenSandboxExecTrue is the same command through the Handle;
// `make bench` wants it within 1.2x of the baseline (no extra calls).
func BenchmarkOpenSandboxExecTrue(b *testing.B) {
	h := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, &opensandbox.Driver{Sandbox: benchSandbox(b)})
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
