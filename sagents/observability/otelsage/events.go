package otelsage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/sage-go/sage/sagents/observability"
)

// The GenAI log events the handler emits (both versions of the
// conventions define them).
const (
	// eventOperationException is emitted for every failed model call
	// (severity WARN).
	eventOperationException = "gen_ai.client.operation.exception"
	// eventOperationDetails is the opt-in event of a model call with its
	// inputs and outputs, emitted when content goes on events
	// (CaptureEvents, CaptureSpansAndEvents).
	eventOperationDetails = "gen_ai.client.inference.operation.details"
)

// Attributes of the exception event.
const (
	attrExceptionType    = attribute.Key("exception.type")
	attrExceptionMessage = attribute.Key("exception.message")
)

// exception emits the exception event of a failed model call, with the
// call's identifying attributes; it belongs to the call's span (ctx).
func (h *Handler) exception(ctx context.Context, st *llmState, err error, errType string) {
	rec, ok := h.event(ctx, eventOperationException, otellog.SeverityWarn, "WARN")
	if !ok {
		return
	}
	rec.AddAttributes(attrExceptionType.String(exceptionType(err)), attrExceptionMessage.String(h.truncate(err.Error())),
		attrErrorType.String(errType))
	rec.AddAttributes(st.attrs...)
	h.logger.Emit(ctx, rec)
}

// event starts the record of an event, or reports false when the logger
// takes none of its kind.
func (h *Handler) event(ctx context.Context, name string, sev otellog.Severity, sevText string) (otellog.Record, bool) {
	var rec otellog.Record
	if !h.logger.Enabled(ctx, otellog.EnabledParameters{Severity: sev, EventName: name}) {
		return rec, false
	}
	now := time.Now()
	rec.SetEventName(name)
	rec.SetTimestamp(now)
	rec.SetObservedTimestamp(now)
	rec.SetSeverity(sev)
	rec.SetSeverityText(sevText)
	return rec, true
}

// exceptionType is the Go type of the innermost error of err's chain that
// is not a plain wrapper (fmt.Errorf's %w), as the conventions allow.
func exceptionType(err error) string {
	for {
		t := reflect.TypeOf(err)
		inner := errors.Unwrap(err)
		if inner == nil || t == nil || (t.String() != "*fmt.wrapError" && t.String() != "*fmt.wrapErrors") {
			if t == nil {
				return "_OTHER"
			}
			return t.String()
		}
		err = inner
	}
}

// details emits the opt-in details event of a model call: its request and
// response attributes, and its input and output messages in structured
// form. r is nil for a failed call.
func (h *Handler) details(ctx context.Context, st *llmState, r *observability.LLMResponse, known bool, errType string) {
	if !h.capture.Events() {
		return
	}
	rec, ok := h.event(ctx, eventOperationDetails, otellog.SeverityInfo, "INFO")
	if !ok {
		return
	}
	rec.AddAttributes(st.attrs...)
	if r != nil {
		rec.AddAttributes(h.responseAttrs(st, *r, known)...)
		if len(r.Messages) > 0 {
			rec.AddAttributes(attribute.KeyValue{Key: attrOutputMessages, Value: structured(h.jsonMessages(r.Messages, true))})
		}
	}
	if errType != "" {
		rec.AddAttributes(attrErrorType.String(errType))
	}
	if len(st.inputs) > 0 {
		rec.AddAttributes(attribute.KeyValue{Key: attrInputMessages, Value: structured(h.jsonMessages(st.inputs, false))})
	}
	h.logger.Emit(ctx, rec)
}

// structured turns a JSON-marshalable value into an attribute value of
// maps and slices (events record messages in structured form).
func structured(v any) attribute.Value {
	b, err := json.Marshal(v)
	if err != nil {
		return attribute.StringValue(fmt.Sprint(v))
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return attribute.StringValue(string(b))
	}
	return toValue(x)
}

func toValue(x any) attribute.Value {
	switch v := x.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kvs := make([]attribute.KeyValue, 0, len(v))
		for _, k := range keys {
			if v[k] == nil {
				continue
			}
			kvs = append(kvs, attribute.KeyValue{Key: attribute.Key(k), Value: toValue(v[k])})
		}
		return attribute.MapValue(kvs...)
	case []any:
		vals := make([]attribute.Value, 0, len(v))
		for _, e := range v {
			vals = append(vals, toValue(e))
		}
		return attribute.SliceValue(vals...)
	case string:
		return attribute.StringValue(v)
	case bool:
		return attribute.BoolValue(v)
	case float64:
		if v == float64(int64(v)) {
			return attribute.Int64Value(int64(v))
		}
		return attribute.Float64Value(v)
	}
	return attribute.StringValue(fmt.Sprint(x))
}
