package llm

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind says what went wrong with a model call.
type Kind int

// The kinds of [Error].
const (
	KindUnknown              Kind = iota
	KindConnection                // the request did not get an HTTP response
	KindTimeout                   // 408, or a per-attempt deadline of this package
	KindConflict                  // 409
	KindRateLimited               // 429 other than an exhausted quota
	KindQuotaExceeded             // 429 insufficient_quota: retrying does not help
	KindServer                    // 5xx or an in-band server_error
	KindAuth                      // 401, 403
	KindNotFound                  // 404, e.g. an unknown model
	KindContextWindow             // the prompt does not fit the model's context
	KindUnsupportedParameter      // the server names a parameter it does not accept
	KindBadRequest                // any other 400/422
	KindResponseTooLarge          // the response passed a ResponseLimits bound
)

var kindNames = map[Kind]string{
	KindUnknown: "unknown", KindConnection: "connection", KindTimeout: "timeout",
	KindConflict: "conflict", KindRateLimited: "rate limited", KindQuotaExceeded: "quota exceeded",
	KindServer: "server error", KindAuth: "authentication", KindNotFound: "not found",
	KindContextWindow: "context window exceeded", KindUnsupportedParameter: "unsupported parameter",
	KindBadRequest: "bad request", KindResponseTooLarge: "response too large",
}

func (k Kind) String() string { return kindNames[k] }

// Sentinels to match an [*Error] with errors.Is.
var (
	ErrContextWindowExceeded = errors.New("llm: context window exceeded")
	ErrRateLimited           = errors.New("llm: rate limited")
	ErrAuth                  = errors.New("llm: authentication failed")
	ErrBadRequest            = errors.New("llm: bad request")
	ErrUnsupportedParameter  = errors.New("llm: unsupported parameter")
	ErrServer                = errors.New("llm: server error")
	ErrConnection            = errors.New("llm: connection failed")
	// ErrResponseTooLarge: a response passed the client's [ResponseLimits].
	ErrResponseTooLarge = errors.New("llm: response too large")
)

// Error is a classified failure of a model call. The underlying go-openai or
// network error is available through Unwrap.
type Error struct {
	Kind       Kind
	StatusCode int           // HTTP status, 0 when there was none
	Message    string        // the server's message
	Type       string        // the server's error type, e.g. invalid_request_error
	Code       string        // the server's error code, e.g. context_length_exceeded
	Param      string        // the parameter the server names, if any
	RetryAfter time.Duration // from Retry-After / retry-after-ms, 0 when absent
	Model      string
	Attempts   int // how many attempts were made before giving up
	Err        error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "llm: %s", e.Kind)
	if e.Model != "" {
		fmt.Fprintf(&b, " (model %s)", e.Model)
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": status %d", e.StatusCode)
	}
	if e.Param != "" {
		fmt.Fprintf(&b, ": param %q", e.Param)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorType is the error.type of the failure for tracing: its kind in
// snake case (rate_limited, context_window_exceeded, authentication, ...).
func (e *Error) ErrorType() string { return strings.ReplaceAll(e.Kind.String(), " ", "_") }

// Is matches the package sentinels by kind.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrContextWindowExceeded:
		return e.Kind == KindContextWindow
	case ErrRateLimited:
		return e.Kind == KindRateLimited || e.Kind == KindQuotaExceeded
	case ErrAuth:
		return e.Kind == KindAuth
	case ErrBadRequest:
		return e.Kind == KindBadRequest || e.Kind == KindUnsupportedParameter || e.Kind == KindContextWindow
	case ErrUnsupportedParameter:
		return e.Kind == KindUnsupportedParameter
	case ErrServer:
		return e.Kind == KindServer
	case ErrConnection:
		return e.Kind == KindConnection
	case ErrResponseTooLarge:
		return e.Kind == KindResponseTooLarge
	}
	return false
}

// Retryable reports whether another attempt may succeed.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindConnection, KindTimeout, KindConflict, KindRateLimited, KindServer:
		return true
	}
	return false
}

// PartialStreamError ends a stream that failed after at least one chunk was
// delivered; such a stream is never retried. Partial holds what was assembled.
type PartialStreamError struct {
	Chunks  int // chunks delivered before the failure
	Partial *Response
	Err     error
}

func (e *PartialStreamError) Error() string {
	return fmt.Sprintf("llm: stream failed after %d chunks: %v", e.Chunks, e.Err)
}

func (e *PartialStreamError) Unwrap() error { return e.Err }

// ArgumentsError reports tool-call arguments that are not valid JSON.
type ArgumentsError struct {
	Name string
	Raw  string
	Err  error
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("llm: tool call %q: invalid JSON arguments %q: %v", e.Name, e.Raw, e.Err)
}

func (e *ArgumentsError) Unwrap() error { return e.Err }

// EmbedBatchError names the batch of an Embed call that failed.
type EmbedBatchError struct {
	Batch      int // zero-based batch number
	Start, End int // the texts[Start:End] the batch held
	Err        error
}

func (e *EmbedBatchError) Error() string {
	return fmt.Sprintf("llm: embedding batch %d (texts %d..%d): %v", e.Batch, e.Start, e.End-1, e.Err)
}

func (e *EmbedBatchError) Unwrap() error { return e.Err }

// ConfigError reports an invalid [Config] or [Request].
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("llm: invalid %s: %s", e.Field, e.Reason) }
