//go:build linux

package aioserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/sagents/sandbox"
)

// BenchmarkKernelRollbackPaired times a rollback of the files and a
// Python kernel's variables to a checkpoint (the fork template:
// Sandbox.Restore, what sandboxd's rollback endpoint calls) against a
// warm execution of "pass" (issue 33's goal: <= 3x), alternating in one
// loop (internal/benchpair): "kernel" against the same kernel's
// execution through /v1/jupyter/execute, "execute_python" against the
// local driver's ExecutePython("pass") in the same session (a new
// interpreter per call).
func BenchmarkKernelRollbackPaired(b *testing.B) {
	f, h := newCheckpointFixture(b)
	kernelRollbackPaired(b, f, h)
}

// BenchmarkKernelRollbackPairedGvisor is the same under isolation gvisor
// (as root): the kernel alive, the checkpoint is of the files (no runsc
// image) and the kernel by its fork template, and a rollback mirrors the
// files with the sandbox paused.
func BenchmarkKernelRollbackPairedGvisor(b *testing.B) {
	f, h := newGvisorCheckpointFixture(b)
	kernelRollbackPaired(b, f, h)
}

func kernelRollbackPaired(b *testing.B, f *fixture, h *sandbox.Sandbox) {
	ctx := context.Background()
	run := func(code string) {
		body, _ := json.Marshal(map[string]any{"code": code, "session_id": "k"})
		resp, err := http.Post(f.ts.URL+"/v1/jupyter/execute", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"status":"ok"`) {
			b.Fatalf("%s: %d %s", code, resp.StatusCode, raw)
		}
	}
	run("x = [1] * 100000")
	cp, err := h.Checkpoint(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rollback := func() {
		res, err := h.Restore(ctx, cp.ID)
		if err != nil || len(res.Restored) != 1 {
			b.Fatalf("rollback: %v %+v", err, res)
		}
	}
	b.Run("kernel", func(b *testing.B) {
		benchpair.Run(b, func() { run("pass") }, rollback)
	})
	b.Run("execute_python", func(b *testing.B) {
		benchpair.Run(b, func() {
			if res, err := h.ExecutePython(ctx, "pass", sandbox.PythonOptions{}); err != nil || !res.Success {
				b.Fatalf("execute_python: %v %+v", err, res)
			}
		}, rollback)
	})
}
