package llm

import (
	"encoding/json"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Message is one chat message. It is go-openai's type under a name of this
// package (an alias: a []llm.Message is a []openai.ChatCompletionMessage), so
// that a caller builds a conversation without importing go-openai, and code
// written against go-openai keeps working.
type Message = openai.ChatCompletionMessage

// ToolDefinition is one function the model may call, as a request sends it
// (go-openai's type, aliased as Message is).
type ToolDefinition = openai.Tool

// FinishReason says why a choice ended: "stop", "length", "tool_calls",
// "content_filter" (go-openai's type, aliased).
type FinishReason = openai.FinishReason

// The roles of chat messages.
const (
	RoleSystem    = openai.ChatMessageRoleSystem
	RoleUser      = openai.ChatMessageRoleUser
	RoleAssistant = openai.ChatMessageRoleAssistant
	RoleTool      = openai.ChatMessageRoleTool
)

// SystemMessage returns a system message with text.
func SystemMessage(text string) Message { return Message{Role: RoleSystem, Content: text} }

// UserMessage returns a user message with text.
func UserMessage(text string) Message { return Message{Role: RoleUser, Content: text} }

// AssistantMessage returns an assistant message with text and no tool
// calls.
func AssistantMessage(text string) Message { return Message{Role: RoleAssistant, Content: text} }

// ToolMessage returns the result of the tool call callID (of the tool
// name) as the model reads it.
func ToolMessage(callID, name, text string) Message {
	return Message{Role: RoleTool, ToolCallID: callID, Name: name, Content: text}
}

// NewRequest returns a Request of the standard model with these messages.
func NewRequest(msgs ...Message) Request {
	var r Request
	r.Messages = msgs
	return r
}

// FunctionTool returns the definition of a function tool: its name, what
// it does, and the JSON Schema of its arguments object (nil: none).
func FunctionTool(name, description string, parameters json.RawMessage) ToolDefinition {
	def := &openai.FunctionDefinition{Name: name, Description: description}
	if parameters != nil {
		def.Parameters = parameters
	}
	return ToolDefinition{Type: openai.ToolTypeFunction, Function: def}
}

// WithStablePrefix returns r with its leading system messages and its tool
// list marked Stable for prompt caching (see [PromptCacheMode]), as an
// agent framework's requests have them: the same on every call of a
// session. The other messages stay Unmarked.
func (r Request) WithStablePrefix() Request {
	var marks []Stability
	for _, m := range r.Messages {
		if m.Role != RoleSystem {
			break
		}
		marks = append(marks, Stable)
	}
	r.Stability, r.ToolsStability = marks, Stable
	return r
}

// ArgumentsText is the call's arguments as text: the JSON when it decoded,
// else what the server sent (the tool then reports invalid arguments to
// the model).
func (t ToolCall) ArgumentsText() string {
	if t.ArgumentsErr != nil || t.Arguments == nil {
		return t.Raw
	}
	return string(t.Arguments)
}

// MessagePart is one part of a message's content (go-openai's type,
// aliased as Message is).
type MessagePart = openai.ChatMessagePart

// TextPart is a part of text.
func TextPart(text string) MessagePart {
	return MessagePart{Type: openai.ChatMessagePartTypeText, Text: text}
}

// ImagePart is an image by URL (https: or a data: URL).
func ImagePart(url string) MessagePart {
	return MessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: url}}
}

// SetContent sets m's content to parts: the text of the parts as one
// string when every part is text (what every server takes), else the
// parts themselves.
func SetContent(m *Message, parts []MessagePart) {
	var text strings.Builder
	for _, p := range parts {
		if p.Type != openai.ChatMessagePartTypeText {
			m.Content, m.MultiContent = "", parts
			return
		}
		text.WriteString(p.Text)
	}
	m.Content, m.MultiContent = text.String(), nil
}
