package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Tool is one function the model can call. A Tool only ever touches the
// sandbox through the Sandbox it is given, so one tool set works in every
// sandbox mode.
type Tool interface {
	// Name is the function name the model calls, e.g. "file_read".
	Name() string
	// Description tells the model what the tool does and when to use it.
	Description() string
	// Schema is the JSON Schema of the arguments object.
	Schema() json.RawMessage
	// Run runs the tool. The Manager has validated args against Schema.
	// A failure the model should read is an *Error; other errors are
	// reported to the model as sandbox errors.
	Run(ctx context.Context, h Sandbox, args json.RawMessage) (Result, error)
}

// Result is what a tool returns to the model.
type Result struct {
	// Text is what the model reads. The Manager bounds it.
	Text string
}

// Func is a [Tool] built from a typed function: its arguments struct T
// gives the schema (through github.com/invopop/jsonschema: a field without
// omitempty is required; descriptions come from the jsonschema_description
// tag and constraints from the jsonschema tag), and the arguments are
// decoded into T strictly (unknown fields are an error).
type Func[T any] struct {
	name, desc string
	schema     json.RawMessage
	run        func(ctx context.Context, h Sandbox, args T) (Result, error)
}

// NewFunc returns a Tool that decodes its arguments into T and calls run.
// It panics if T is not a struct, as a programming error.
func NewFunc[T any](name, description string, run func(ctx context.Context, h Sandbox, args T) (Result, error)) *Func[T] {
	return &Func[T]{name: name, desc: description, schema: SchemaFor[T](), run: run}
}

// Name implements Tool.
func (f *Func[T]) Name() string { return f.name }

// Description implements Tool.
func (f *Func[T]) Description() string { return f.desc }

// Schema implements Tool.
func (f *Func[T]) Schema() json.RawMessage { return f.schema }

// Run implements Tool.
func (f *Func[T]) Run(ctx context.Context, h Sandbox, raw json.RawMessage) (Result, error) {
	var args T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return Result{}, &Error{Code: CodeInvalidArguments, Message: "arguments do not decode: " + err.Error(),
			Hint: "send a JSON object matching the tool's parameters schema", Err: err}
	}
	return f.run(ctx, h, args)
}

// SchemaFor returns the JSON Schema of the struct T as an OpenAI function's
// parameters: inline (no $ref), no $schema or $id, additionalProperties
// false.
func SchemaFor[T any]() json.RawMessage {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tools: arguments type %v is not a struct", t))
	}
	r := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.ReflectFromType(t)
	s.Version = ""
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tools: schema of %v: %v", t, err))
	}
	return b
}

// Error codes of tool errors.
const (
	CodeInvalidArguments = "invalid_arguments"
	CodeUnknownTool      = "unknown_tool"
	CodeNotFound         = "not_found"
	CodePermission       = "permission_denied"
	CodeIsDirectory      = "is_directory"
	CodeBinaryFile       = "binary_file"
	CodeNoMatch          = "no_match"
	CodeAmbiguousMatch   = "ambiguous_match"
	CodeInvalidPattern   = "invalid_pattern"
	CodePolicyDenied     = "policy_denied"
	CodeNotApproved      = "not_approved"
	CodeUnsupported      = "unsupported"
	CodeTimeout          = "timeout"
	CodeCanceled         = "canceled"
	CodeUnknownTask      = "unknown_task"
	CodeCommandFailed    = "command_failed"
	CodeSandbox          = "sandbox_error"
)

// Error is a tool failure the model can read. It is sent to the model as
// {"success": false, "error_code": ..., "message": ..., "hint": ...}.
type Error struct {
	Code    string `json:"error_code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// Err is the underlying error, if any; it is not sent to the model.
	Err error `json:"-"`
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return fmt.Sprintf("tools: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("tools: %s: %s (hint: %s)", e.Code, e.Message, e.Hint)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorType is the code; it feeds the error.type span attribute.
func (e *Error) ErrorType() string { return e.Code }

// JSON renders the error as the model sees it.
func (e *Error) JSON() string {
	b, _ := json.Marshal(struct {
		Success bool `json:"success"`
		*Error
	}{false, e})
	return string(b)
}

// AsError turns any error into an *Error, choosing a code from what it
// matches (fs.ErrNotExist, fs.ErrPermission, sandbox.ErrUnsupported, context
// errors).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	msg := err.Error()
	switch {
	case errors.Is(err, sandbox.ErrUnknownTask):
		return &Error{Code: CodeUnknownTask, Message: msg, Hint: "use the task_id returned by execute_shell_command", Err: err}
	case isNotExist(err):
		return &Error{Code: CodeNotFound, Message: msg, Hint: "check the path with list_dir or glob", Err: err}
	case isPermission(err):
		return &Error{Code: CodePermission, Message: msg, Hint: "stay inside the workspace and its mounts", Err: err}
	case errors.Is(err, sandbox.ErrUnsupported):
		return &Error{Code: CodeUnsupported, Message: msg, Hint: "this sandbox mode cannot do that; try another tool", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: msg, Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCanceled, Message: msg, Err: err}
	}
	return &Error{Code: CodeSandbox, Message: msg, Err: err}
}

func invalidArgs(format string, a ...any) *Error {
	return &Error{Code: CodeInvalidArguments, Message: fmt.Sprintf(format, a...)}
}

// oneLine shortens s to its first line.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
