package observability

import (
	"context"
	"errors"
	"fmt"
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
)

var kindNames = [...]string{"", "chain", "agent", "llm", "tool", "message"}

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
	ToolCallID string // for role "tool"
}

// Usage is the token usage of one model call. Zero fields are not reported.
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
	Inputs    []Message
}

// AgentResult ends an agent run.
type AgentResult struct {
	Outputs []Message
}

// LLMRequest starts one model call.
type LLMRequest struct {
	SessionID     string    // inherited when empty
	Provider      string    // gen_ai.provider.name; "openai" when empty
	Model         string    // the requested model
	ModelType     ModelType // standard or fast
	Step          string
	ServerAddress string // host of the API endpoint
	ServerPort    int
	Stream        bool
	Messages      []Message
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
	Messages         []Message // the output message(s)
}

// ToolCall starts one tool call.
type ToolCall struct {
	SessionID string // inherited when empty
	Name      string
	CallID    string
	Arguments string // JSON text as the model produced it
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
// attribute: the ErrorType of the first error in the chain implementing
// [ErrorTyper], "timeout" or "canceled" for context errors, otherwise the Go
// type of the innermost error that is not a plain errors.New or fmt.Errorf
// value, or "_OTHER".
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
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrParentEnded):
		return "parent_ended"
	}
	// The innermost error whose type says something.
	kind := "_OTHER"
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch t := fmt.Sprintf("%T", e); t {
		case "*errors.errorString", "*fmt.wrapError", "*fmt.wrapErrors", "*errors.joinError":
		default:
			kind = t
		}
	}
	return kind
}
