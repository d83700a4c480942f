package sandboxtest_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestSandboxOverFake checks what *sandbox.Sandbox adds to any driver:
// defaults, ErrUnsupported for missing capabilities, the closed state and
// counters.
func TestSandboxOverFake(t *testing.T) {
	ctx := context.Background()
	s, f := sandboxtest.NewFake()
	require.NoError(t, s.WriteFile(ctx, "a/b.txt", []byte("hi"), sandbox.WriteOptions{}))
	got, err := s.ReadFile(ctx, "/workspace/a/b.txt")
	require.NoError(t, err)
	assert.Equal(t, "hi", string(got))
	ok, err := s.FileExists(ctx, "a/nope")
	require.NoError(t, err)
	assert.False(t, ok)
	list, err := s.ListDirectory(ctx, ".")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.True(t, list[0].IsDir)
	_, err = s.ReadFile(ctx, "../etc/passwd")
	assert.ErrorIs(t, err, sandbox.ErrEscape)
	assert.ErrorIs(t, err, fs.ErrPermission)
	var pe *fs.PathError
	assert.True(t, errors.As(err, &pe))

	_, err = s.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	require.NoError(t, err)
	execs := f.Execs()
	require.Len(t, execs, 1)
	assert.Equal(t, sandbox.DefaultTimeout, execs[0].Timeout, "default timeout filled in")
	assert.Equal(t, sandbox.DefaultOutputLimit, execs[0].OutputLimit, "default output limit filled in")

	_, err = s.ExecutePython(ctx, "print(1)", sandbox.PythonOptions{})
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	_, err = s.StartBackground(ctx, "sleep 1", sandbox.ExecOptions{})
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	_, err = s.ToHostPath("x")
	assert.ErrorIs(t, err, sandbox.ErrUnsupported)
	assert.ErrorIs(t, s.Restart(ctx), sandbox.ErrUnsupported)
	assert.Equal(t, "", s.HostWorkspacePath())

	st := s.Stats()
	assert.Equal(t, int64(1), st.Commands)
	assert.GreaterOrEqual(t, st.Errors, int64(2), "missing file and escape count as errors")

	require.NoError(t, s.Close(ctx))
	require.NoError(t, s.Close(ctx))
	assert.Equal(t, 1, f.Closed(), "the driver is closed once")
	_, err = s.ReadFile(ctx, "a/b.txt")
	assert.ErrorIs(t, err, sandbox.ErrClosed)
	_, err = s.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	assert.ErrorIs(t, err, sandbox.ErrClosed)
}

// TestSandboxEvents checks that operations reach the observability
// Manager as sandbox runs, nested under the tool run of the context.
func TestSandboxEvents(t *testing.T) {
	rec := &observabilitytest.Recorder{}
	m := observability.New(observability.Options{Handlers: []observability.Handler{rec}})
	s, _ := sandboxtest.NewFake()
	s = sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Passthrough, Observer: m}, s.Driver())
	ctx := m.ToolStart(context.Background(), observability.ToolCall{Name: "file_read"})
	_, err := s.ReadFile(ctx, "missing")
	require.Error(t, err)
	_, err = s.ReadFile(ctx, "../x")
	require.Error(t, err)
	_, err = s.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	require.NoError(t, err)
	m.ToolEnd(ctx, observability.ToolResult{})
	require.NoError(t, s.Close(context.Background()))

	var ops []string
	for _, op := range observabilitytest.Data[observability.SandboxOp](rec, "SandboxStart") {
		ops = append(ops, op.Op+" "+op.Path)
	}
	assert.Equal(t, []string{"read_file missing", "read_file ../x", "exec ", "release "}, ops)
	require.Len(t, observabilitytest.Data[observability.SandboxResult](rec, "SandboxEnd"), 3)
	assert.True(t, observabilitytest.Data[observability.SandboxResult](rec, "SandboxEnd")[0].NotFound, "a missing file is an answer, not a failure")
	assert.True(t, observabilitytest.Data[observability.SandboxResult](rec, "SandboxEnd")[1].Command)
	require.Len(t, rec.Errs("SandboxError"), 1)
	assert.ErrorIs(t, rec.Errs("SandboxError")[0], sandbox.ErrEscape)
}
