package otelsage

import (
	"context"
	"errors"
	"io/fs"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// Attributes of the sandbox spans (sage's own: no convention covers them).
const (
	attrSandboxMode      = attribute.Key("sage.sandbox.mode")
	attrSandboxID        = attribute.Key("sage.sandbox.id")
	attrSandboxIsolation = attribute.Key("sage.sandbox.isolation")
	attrSandboxNetwork   = attribute.Key("sage.sandbox.network")
	attrSandboxPath      = attribute.Key("sage.sandbox.path")
	attrSandboxTaskID    = attribute.Key("sage.sandbox.task_id")
	attrSandboxExitCode  = attribute.Key("sage.sandbox.exit_code")
	attrSandboxSignal    = attribute.Key("sage.sandbox.signal")
	attrSandboxTimedOut  = attribute.Key("sage.sandbox.timed_out")
	attrSandboxNotFound  = attribute.Key("sage.sandbox.not_found")
	// The checkpoint an agent turn ended with (Sandbox.CheckpointTurn).
	attrCheckpointID   = attribute.Key("sage.checkpoint.id")
	attrCheckpointTurn = attribute.Key("sage.checkpoint.turn")
	attrCheckpointSize = attribute.Key("sage.checkpoint.size")
)

// sandboxSpanKey holds the span of a sandbox run, so that its end never
// ends another run's span.
type sandboxSpanKey struct{}

// SandboxStart starts a "sandbox.{op}" span, a child of the span the
// context carries (a tool span, usually, or a chain's). Without a
// recording parent nothing is recorded: a sandbox operation outside any
// traced run is not a trace of its own. Commands and file contents are
// never recorded; paths are.
func (h *Handler) SandboxStart(ctx context.Context, op observability.SandboxOp) (context.Context, error) {
	if st := stateOf(ctx); st != nil && st.wf != nil && !trace.SpanFromContext(ctx).IsRecording() {
		// Directly under a chain (the CLI acquiring the sandbox before its
		// agent starts, sage exec): its span starts here.
		ctx = st.wf.child(ctx, h, "sandbox", op.Op, false)
	}
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{attrSandboxMode.String(op.Mode), attrSandboxID.String(op.SandboxID)}
	if op.Isolation != "" {
		attrs = append(attrs, attrSandboxIsolation.String(op.Isolation))
	}
	if op.Network != "" {
		attrs = append(attrs, attrSandboxNetwork.String(op.Network))
	}
	if op.Path != "" {
		attrs = append(attrs, attrSandboxPath.String(op.Path))
	}
	if op.TaskID != "" {
		attrs = append(attrs, attrSandboxTaskID.String(op.TaskID))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	if !op.Start.IsZero() {
		opts = append(opts, trace.WithTimestamp(op.Start))
	}
	ctx, span := h.tracer.Start(ctx, "sandbox."+op.Op, opts...)
	return context.WithValue(ctx, sandboxSpanKey{}, span), nil
}

// SandboxEnd ends the sandbox span.
func (h *Handler) SandboxEnd(ctx context.Context, r observability.SandboxResult) error {
	span, _ := ctx.Value(sandboxSpanKey{}).(trace.Span)
	if span == nil {
		return nil
	}
	if r.Command {
		span.SetAttributes(attrSandboxExitCode.Int(r.ExitCode), attrSandboxTimedOut.Bool(r.TimedOut))
		if r.Signal != "" {
			span.SetAttributes(attrSandboxSignal.String(r.Signal))
		}
	}
	if r.NotFound {
		span.SetAttributes(attrSandboxNotFound.Bool(true))
	}
	if r.TaskID != "" {
		span.SetAttributes(attrSandboxTaskID.String(r.TaskID))
	}
	if c := r.Checkpoint; c != nil {
		span.SetAttributes(attrCheckpointID.String(c.ID), attrCheckpointTurn.Int(c.Turn), attrCheckpointSize.Int64(c.Size))
	}
	span.End()
	return nil
}

// SandboxError ends the sandbox span with an error.
func (h *Handler) SandboxError(ctx context.Context, err error) error {
	span, _ := ctx.Value(sandboxSpanKey{}).(trace.Span)
	if span == nil {
		return nil
	}
	et := observability.ErrorType(err)
	if errors.Is(err, fs.ErrNotExist) {
		span.SetAttributes(attrSandboxNotFound.Bool(true))
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(attrErrorType.String(et))
	span.End()
	return nil
}

var _ observability.SandboxHandler = (*Handler)(nil)
