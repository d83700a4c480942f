package llm

import (
	"encoding/json"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMessagesWithoutGoOpenAI: a request built with this package's names
// is the go-openai request (the aliases are the same types), and marshals
// as OpenAI's wire format.
func TestMessagesWithoutGoOpenAI(t *testing.T) {
	r := NewRequest(SystemMessage("be brief"), UserMessage("hi"), AssistantMessage("hello"), ToolMessage("c1", "ls", "a.txt"))
	r.Tools = []ToolDefinition{FunctionTool("ls", "list files", json.RawMessage(`{"type":"object"}`))}
	var plain []openai.ChatCompletionMessage = r.Messages
	assert.Equal(t, openai.ChatMessageRoleTool, plain[3].Role)
	b, err := json.Marshal(r.ChatCompletionRequest)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"","stream":false,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},
		{"role":"assistant","content":"hello"},{"role":"tool","content":"a.txt","name":"ls","tool_call_id":"c1"}],
		"tools":[{"type":"function","function":{"name":"ls","description":"list files","parameters":{"type":"object"}}}]}`, string(b))
}

func TestWithStablePrefix(t *testing.T) {
	r := NewRequest(SystemMessage("a"), SystemMessage("b"), UserMessage("c"), SystemMessage("d")).WithStablePrefix()
	assert.Equal(t, []Stability{Stable, Stable}, r.Stability, "only the leading system messages")
	assert.Equal(t, Stable, r.ToolsStability)
	assert.Empty(t, NewRequest(UserMessage("x")).WithStablePrefix().Stability)
}

func TestArgumentsText(t *testing.T) {
	assert.Equal(t, `{"a":1}`, ToolCall{Arguments: json.RawMessage(`{"a":1}`), Raw: `{"a":1}`}.ArgumentsText())
	assert.Equal(t, `{"a":`, ToolCall{Raw: `{"a":`, ArgumentsErr: &ArgumentsError{}}.ArgumentsText())
}

func TestSetContent(t *testing.T) {
	m := UserMessage("old")
	SetContent(&m, []MessagePart{TextPart("a"), TextPart("b")})
	assert.Equal(t, "ab", m.Content, "text parts alone are plain content")
	assert.Nil(t, m.MultiContent)
	SetContent(&m, []MessagePart{TextPart("look"), ImagePart("https://x/a.png")})
	assert.Empty(t, m.Content)
	require.Len(t, m.MultiContent, 2)
	assert.Equal(t, "https://x/a.png", m.MultiContent[1].ImageURL.URL)
}
