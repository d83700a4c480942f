package otelsage_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
)

// TestSandboxAcquireUnderWorkflow: a program (the CLI) that starts its run
// before it acquires the sandbox gets the acquire and the release traced
// in that run: an invoke_workflow span holding sandbox.acquire,
// invoke_agent and sandbox.release. Control: the same run without sandbox
// operations is only its agent (the workflow cannot be told apart).
func TestSandboxAcquireUnderWorkflow(t *testing.T) {
	for _, withSandbox := range []bool{true, false} {
		f := newFixture(t, nil)
		ctx := f.m.ChainStart(context.Background(), observability.ChainInfo{SessionID: "s", Name: "sage"})
		if withSandbox {
			sctx := f.m.SandboxStart(ctx, observability.SandboxOp{Op: "acquire", Mode: "remote", SandboxID: "t1"})
			f.m.SandboxEnd(sctx, observability.SandboxResult{})
		}
		actx := f.m.AgentStart(ctx, observability.AgentInfo{Name: "sage"})
		f.m.AgentEnd(actx, observability.AgentResult{})
		if withSandbox {
			sctx := f.m.SandboxStart(ctx, observability.SandboxOp{Op: "release", Mode: "remote", SandboxID: "t1"})
			f.m.SandboxEnd(sctx, observability.SandboxResult{})
		}
		f.m.ChainEnd(ctx, observability.ChainResult{})

		n := byName(f.rec.Ended())
		if !withSandbox {
			assert.NotContains(t, n, "invoke_workflow sage", "control: a workflow that is only its agent is not reported")
			require.Len(t, n["invoke_agent sage"], 1)
			continue
		}
		require.Len(t, n["invoke_workflow sage"], 1, "spans: %v", n)
		wf := n["invoke_workflow sage"][0]
		for _, name := range []string{"sandbox.acquire", "invoke_agent sage", "sandbox.release"} {
			require.Len(t, n[name], 1, name)
			assert.Equal(t, wf.SpanContext().SpanID(), n[name][0].Parent().SpanID(), "%s is not under the workflow", name)
		}
	}
}
