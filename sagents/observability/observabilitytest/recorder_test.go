package observabilitytest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
)

// Every event through a Manager comes back in order, with its run, its
// argument and its error.
func TestRecorderKeepsEvents(t *testing.T) {
	rec := &observabilitytest.Recorder{}
	m := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	ctx := m.ToolStart(context.Background(), observability.ToolCall{Name: "file_read", CallID: "c1"})
	sctx := m.SandboxStart(ctx, observability.SandboxOp{Op: "read_file", Path: "x"})
	m.SandboxEnd(sctx, observability.SandboxResult{NotFound: true})
	boom := errors.New("boom")
	m.ToolError(ctx, boom)

	var ops []string
	for _, e := range rec.Events() {
		ops = append(ops, e.Op+" "+e.Run.Kind.String())
	}
	want := []string{"ToolStart tool", "SandboxStart sandbox", "SandboxEnd sandbox", "ToolError tool"}
	if len(ops) != len(want) {
		t.Fatalf("events %v, want %v", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Errorf("event %d: %s, want %s", i, ops[i], want[i])
		}
	}
	if c := observabilitytest.Data[observability.ToolCall](rec, "ToolStart"); len(c) != 1 || c[0].CallID != "c1" {
		t.Errorf("ToolStart data %v", c)
	}
	if r := observabilitytest.Data[observability.SandboxResult](rec, "SandboxEnd"); len(r) != 1 || !r[0].NotFound {
		t.Errorf("SandboxEnd data %v", r)
	}
	if len(observabilitytest.Data[observability.ToolCall](rec, "SandboxStart")) != 0 {
		t.Error("Data returned events of another type")
	}
	if errs := rec.Errs("ToolError"); len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Errorf("ToolError errors %v", errs)
	}
}
