package sandbox_test

import (
	"context"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
)

func TestWithTracingMakesChildSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "execute_tool x")

	h, err := sandbox.NewTraced(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir(), RuntimeDir: t.TempDir(), SandboxID: "sb1"})
	require.NoError(t, err)
	defer h.Close(context.Background())
	require.NoError(t, h.WriteFile(ctx, "a.txt", []byte("x"), sandbox.WriteOptions{}))
	_, err = h.ReadFile(ctx, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = h.ReadFile(ctx, "../../../etc/passwd")
	require.ErrorIs(t, err, fs.ErrPermission)
	res, err := h.ExecuteCommand(ctx, "exit 4", sandbox.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, 4, res.ExitCode)
	// Without a span in the context nothing is recorded.
	_, err = h.ExecuteCommand(context.Background(), "true", sandbox.ExecOptions{})
	require.NoError(t, err)
	parent.End()

	spans := rec.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
		if s.Name() == "execute_tool x" {
			continue
		}
		require.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		require.Equal(t, "passthrough", attrs["sandbox.mode"], s.Name())
		if s.Name() != "sandbox.acquire" {
			require.Equal(t, "sb1", attrs["sandbox.id"], s.Name())
		}
		switch {
		case s.Name() == "sandbox.exec":
			require.Equal(t, "4", attrs["sandbox.exit_code"])
		case s.Name() == "sandbox.read_file" && attrs["sandbox.path"] == "missing":
			require.Equal(t, "true", attrs["sandbox.not_found"])
			require.Equal(t, "Unset", s.Status().Code.String())
		case s.Name() == "sandbox.read_file":
			require.Equal(t, "Error", s.Status().Code.String())
			require.Equal(t, "permission", attrs["error.type"])
		}
	}
	require.Equal(t, []string{"sandbox.acquire", "sandbox.write_file", "sandbox.read_file", "sandbox.read_file", "sandbox.exec", "execute_tool x"}, names)
	require.NotNil(t, h.(interface{ Unwrap() sandbox.Handle }).Unwrap())
}
