package observability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"reflect"
	"strconv"
	"syscall"
	"time"
)

// Kind is the family of a run.
type Kind uint8

// The run families.
const (
	KindChain Kind = iota + 1
	KindAgent
	KindLLM
	KindTool
	KindMessage
	KindSandbox
)

var kindNames = [...]string{"", "chain", "agent", "llm", "tool", "message", "sandbox"}

// String returns the lower-case family name ("chain", "agent", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Run is the identity of one run, carried by the context a start returns.
// Handlers read it with [RunFromContext].
type Run struct {
	// ID is unique within the process; never 0.
	ID uint64
	// ParentID is the ID of the enclosing run, 0 for a root.
	ParentID uint64
	// RootID is the ID of the outermost run (usually the chain).
	RootID uint64
	// Kind is the run's family.
	Kind Kind
	// Name is the chain or agent name, the requested model, the tool name,
	// or the message role.
	Name string
	// SessionID is the session (conversation) id, inherited from the parent
	// run when the event does not set it.
	SessionID string
	// Start is when the run started.
	Start time.Time
}

// ModelType says which of the llm client's two models served a call.
type ModelType string

// Model types of the dual llm client.
const (
	ModelStandard ModelType = "standard"
	ModelFast     ModelType = "fast"
)

// Message is one chat message. Its content is only exported by handlers when
// content capture is on.
type Message struct {
	Role       string // system, user, assistant, tool
	Content    string
	Name       string // optional participant or tool name
	ToolCallID string // for role "tool": the call this message answers
	// ToolCalls are the tool calls of an assistant message, in order.
	ToolCalls []ToolCallRef
	// FinishReason is why the model stopped producing this (output)
	// message: stop, length, tool_calls, content_filter, ...
	FinishReason string
}

// ToolCallRef is one tool call requested by the model inside a message.
type ToolCallRef struct {
	ID        string
	Name      string
	Arguments string // JSON text as the model produced it
}

// Usage is the token usage of one model call. Zero fields are not reported;
// a Usage whose input and output counts are both zero is unknown (the server
// sent none) and reported as nothing.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// CacheReadInputTokens are input tokens served from a provider cache
	// (included in InputTokens).
	CacheReadInputTokens int64
	// CacheCreationInputTokens are input tokens written to a provider cache.
	CacheCreationInputTokens int64
	// ReasoningTokens are output tokens spent on reasoning.
	ReasoningTokens int64
}

// ChainInfo starts a chain: one user turn of a session.
type ChainInfo struct {
	SessionID string
	Name      string // workflow name, e.g. "deep_research"
	Inputs    []Message
}

// ChainResult ends a chain.
type ChainResult struct {
	Outputs []Message
}

// AgentInfo starts one agent run.
type AgentInfo struct {
	SessionID string // inherited from the chain when empty
	Name      string
	Step      string // the step or node of the workflow, if any
	// Provider and Model are the agent's configured model, when it has
	// one: the conventions want them when the agent's span starts (for
	// sampling), not only once its first model call answered.
	Provider string
	Model    string
	Inputs   []Message
}

// AgentResult ends an agent run.
type AgentResult struct {
	Outputs []Message
}

// The operations of a model call.
const (
	OpChat       = "chat"
	OpEmbeddings = "embeddings"
)

// LLMRequest starts one model call.
type LLMRequest struct {
	// Operation is OpChat (when empty) or OpEmbeddings.
	Operation     string
	SessionID     string    // inherited when empty
	Provider      string    // gen_ai.provider.name; "openai" when empty
	Model         string    // the requested model
	ModelType     ModelType // standard or fast
	Step          string
	ServerAddress string // host of the API endpoint
	ServerPort    int
	Stream        bool
	// APIType is the provider API the call used, for providers that have
	// more than one ("chat_completions" or "responses" for OpenAI's).
	APIType  string
	Messages []Message
	// Params are the request parameters that were set.
	Params RequestParams
}

// RequestParams are the optional parameters of a model call; nil and zero
// values were not set and are not reported.
type RequestParams struct {
	Temperature      *float64
	TopP             *float64
	MaxTokens        int
	Stop             []string
	Seed             *int64
	FrequencyPenalty *float64
	PresencePenalty  *float64
	ChoiceCount      int    // n, reported when not 1
	OutputType       string // text, json, ...; empty when not set
	Dimensions       int    // of requested embeddings
	ServiceTier      string // the service tier asked for, if any
}

// LLMResponse ends one model call.
type LLMResponse struct {
	ID            string // response id
	Model         string // the model that answered
	FinishReasons []string
	Usage         Usage
	// TimeToFirstChunk is the time from the request to the first streamed
	// chunk; zero when unknown or not streaming.
	TimeToFirstChunk time.Duration
	// ChunkIntervals are the times between one streamed chunk and the
	// next, from the second chunk on (at most MaxChunkIntervals, the
	// first ones); nil when not streaming.
	ChunkIntervals []time.Duration
	// SystemFingerprint and ServiceTier are what the server said of the
	// backend that answered, when it said it.
	SystemFingerprint string
	ServiceTier       string
	Messages          []Message // the output message(s)
}

// MaxChunkIntervals bounds LLMResponse.ChunkIntervals: a stream's first
// intervals are kept, the rest are not reported.
const MaxChunkIntervals = 4096

// ToolCall starts one tool call.
type ToolCall struct {
	SessionID   string // inherited when empty
	Name        string
	Description string // the tool's description, as the model saw it
	CallID      string
	Arguments   string // JSON text as the model produced it
}

// ToolResult ends one tool call.
type ToolResult struct {
	Result string // the text returned to the model
}

// ErrParentEnded is the error with which a run that is still open is ended
// when its parent ends.
var ErrParentEnded = errors.New("observability: parent run ended before this run")

// ErrorTyper is implemented by errors that name their own low-cardinality
// type for the error.type attribute.
type ErrorTyper interface {
	ErrorType() string
}

// ErrorType returns a low-cardinality name for err, for the error.type
// attribute:
//
//   - the ErrorType of the first error in the chain implementing
//     [ErrorTyper] (the llm and tools packages classify their own errors:
//     rate_limited, context_window_exceeded, authentication, ...);
//   - "timeout" and "canceled" for context errors and network timeouts,
//     "parent_ended" for [ErrParentEnded];
//   - for an error carrying an HTTP status (an int field HTTPStatusCode or
//     StatusCode, as SDK errors have): the status class ("rate_limited",
//     "authentication", "server_error", ...), or the status itself;
//   - "connection" for other network errors, "not_found" and
//     "permission_denied" for file-system errors;
//   - "_OTHER" otherwise (never a Go type name).
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var et ErrorTyper
	if errors.As(err, &et) {
		if s := et.ErrorType(); s != "" {
			return s
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrParentEnded):
		return "parent_ended"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	if code := httpStatus(err); code != 0 {
		return statusType(code)
	}
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &op), errors.As(err, &dns), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection"
	case errors.Is(err, fs.ErrNotExist):
		return "not_found"
	case errors.Is(err, fs.ErrPermission):
		return "permission_denied"
	}
	return "_OTHER"
}

// httpStatus finds an HTTP status in err's chain: an int field named
// HTTPStatusCode or StatusCode of a struct (or pointer to one) in the 100-599
// range.
func httpStatus(err error) int {
	for depth, e := 0, err; e != nil && depth < 32; depth, e = depth+1, errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				continue
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			continue
		}
		for _, name := range []string{"HTTPStatusCode", "StatusCode"} {
			f := v.FieldByName(name)
			if f.IsValid() && f.CanInt() {
				if c := f.Int(); c >= 100 && c < 600 {
					return int(c)
				}
			}
		}
	}
	return 0
}

// statusType names an HTTP error status.
func statusType(code int) string {
	switch {
	case code == 429:
		return "rate_limited"
	case code == 401 || code == 403:
		return "authentication"
	case code == 404:
		return "not_found"
	case code == 408 || code == 504:
		return "timeout"
	case code == 413:
		return "request_too_large"
	case code >= 500:
		return "server_error"
	}
	return strconv.Itoa(code)
}
