package sandbox

import (
	"context"
	"errors"
	"io/fs"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the sandbox spans.
const TracerName = "github.com/sage-go/sage/sagents/sandbox"

// Span attributes of sandbox operations.
const (
	AttrMode     = attribute.Key("sandbox.mode")
	AttrID       = attribute.Key("sandbox.id")
	AttrPath     = attribute.Key("sandbox.path")
	AttrExitCode = attribute.Key("sandbox.exit_code")
	AttrTimedOut = attribute.Key("sandbox.timed_out")
	AttrTaskID   = attribute.Key("sandbox.task_id")
)

// WithTracing returns a Handle whose operations (exec, python, file ops,
// background tasks) appear as spans named "sandbox.<op>", children of the
// span carried by each call's context, with the sandbox mode and id as
// attributes. The spans are made by the TracerProvider of that parent span,
// so without a recording span in the context nothing is recorded and the
// cost is a context lookup. Commands and file contents are never recorded;
// paths are.
//
// The wrapper hides the provider's concrete type; Unwrap returns it.
func WithTracing(h Handle) Handle {
	if t, ok := h.(*tracedHandle); ok {
		return t
	}
	return &tracedHandle{Handle: h, base: []attribute.KeyValue{AttrMode.String(string(h.Type())), AttrID.String(h.ID())}}
}

// NewTraced is [New] inside a "sandbox.acquire" span, returning a Handle
// wrapped with [WithTracing].
func NewTraced(ctx context.Context, cfg Config) (Handle, error) {
	ctx, span := startSpan(ctx, "sandbox.acquire", AttrMode.String(string(cfg.Mode)))
	h, err := New(ctx, cfg)
	if err != nil {
		endSpan(span, err)
		return nil, err
	}
	span.SetAttributes(AttrID.String(h.ID()))
	endSpan(span, nil)
	return WithTracing(h), nil
}

type tracedHandle struct {
	Handle
	base []attribute.KeyValue
}

// Unwrap returns the traced Handle.
func (t *tracedHandle) Unwrap() Handle { return t.Handle }

func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent // no-op: nothing to attach to
	}
	return parent.TracerProvider().Tracer(TracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

func (t *tracedHandle) start(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return startSpan(ctx, "sandbox."+op, append(attrs, t.base...)...)
}

// endSpan ends span with err. A missing file is an expected answer, not an
// error of the operation, so it only sets an attribute.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		span.SetAttributes(attribute.Bool("sandbox.not_found", true))
	default:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", errorType(err)))
	}
	span.End()
}

func errorType(err error) string {
	var pe *PathError
	switch {
	case errors.As(err, &pe), errors.Is(err, fs.ErrPermission):
		return "permission"
	case errors.Is(err, ErrUnsupported):
		return "unsupported"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "sandbox"
}

func endResult(span trace.Span, res *CommandResult, err error) {
	if span != nil && res != nil {
		span.SetAttributes(AttrExitCode.Int(res.ExitCode), AttrTimedOut.Bool(res.TimedOut))
	}
	endSpan(span, err)
}

func (t *tracedHandle) ExecuteCommand(ctx context.Context, command string, opts ExecOptions) (*CommandResult, error) {
	ctx, span := t.start(ctx, "exec")
	res, err := t.Handle.ExecuteCommand(ctx, command, opts)
	endResult(span, res, err)
	return res, err
}

func (t *tracedHandle) ExecutePython(ctx context.Context, code string, opts PythonOptions) (*CommandResult, error) {
	ctx, span := t.start(ctx, "python")
	res, err := t.Handle.ExecutePython(ctx, code, opts)
	endResult(span, res, err)
	return res, err
}

func (t *tracedHandle) ReadFile(ctx context.Context, path string) ([]byte, error) {
	ctx, span := t.start(ctx, "read_file", AttrPath.String(path))
	b, err := t.Handle.ReadFile(ctx, path)
	endSpan(span, err)
	return b, err
}

func (t *tracedHandle) WriteFile(ctx context.Context, path string, data []byte, opts WriteOptions) error {
	ctx, span := t.start(ctx, "write_file", AttrPath.String(path))
	err := t.Handle.WriteFile(ctx, path, data, opts)
	endSpan(span, err)
	return err
}

func (t *tracedHandle) FileExists(ctx context.Context, path string) (bool, error) {
	ctx, span := t.start(ctx, "file_exists", AttrPath.String(path))
	ok, err := t.Handle.FileExists(ctx, path)
	endSpan(span, err)
	return ok, err
}

func (t *tracedHandle) ListDirectory(ctx context.Context, path string) ([]FileInfo, error) {
	ctx, span := t.start(ctx, "list_dir", AttrPath.String(path))
	fi, err := t.Handle.ListDirectory(ctx, path)
	endSpan(span, err)
	return fi, err
}

func (t *tracedHandle) EnsureDirectory(ctx context.Context, path string) error {
	ctx, span := t.start(ctx, "ensure_dir", AttrPath.String(path))
	err := t.Handle.EnsureDirectory(ctx, path)
	endSpan(span, err)
	return err
}

func (t *tracedHandle) DeleteFile(ctx context.Context, path string) error {
	ctx, span := t.start(ctx, "delete", AttrPath.String(path))
	err := t.Handle.DeleteFile(ctx, path)
	endSpan(span, err)
	return err
}

func (t *tracedHandle) FileTree(ctx context.Context, path string, opts TreeOptions) (*TreeNode, error) {
	ctx, span := t.start(ctx, "file_tree", AttrPath.String(path))
	n, err := t.Handle.FileTree(ctx, path, opts)
	endSpan(span, err)
	return n, err
}

func (t *tracedHandle) CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts CopyOptions) (CopyResult, error) {
	ctx, span := t.start(ctx, "copy_from_host", AttrPath.String(sandboxPath))
	r, err := t.Handle.CopyFromHost(ctx, hostPath, sandboxPath, opts)
	endSpan(span, err)
	return r, err
}

func (t *tracedHandle) StartBackground(ctx context.Context, command string, opts ExecOptions) (*BackgroundTask, error) {
	ctx, span := t.start(ctx, "start_background")
	task, err := t.Handle.StartBackground(ctx, command, opts)
	if span != nil && task != nil {
		span.SetAttributes(AttrTaskID.String(task.ID))
	}
	endSpan(span, err)
	return task, err
}

func (t *tracedHandle) KillBackground(ctx context.Context, taskID string, force bool) error {
	ctx, span := t.start(ctx, "kill_background", AttrTaskID.String(taskID))
	err := t.Handle.KillBackground(ctx, taskID, force)
	endSpan(span, err)
	return err
}
