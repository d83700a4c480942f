package einosage_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	einosage "github.com/sage-go/sage/adapters/eino"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/sage"
	"github.com/sage-go/sage/sagents/sage/sagetest"
)

// runtime is a passthrough runtime with a model on srv.
func runtime(t *testing.T, srv *llmtest.Server) *sage.Runtime {
	return sagetest.Passthrough(t, srv.URL, llmtest.Model)
}

const toolCallBody = `{"id":"x","model":"fake-model","choices":[{"index":0,"finish_reason":"tool_calls",
	"message":{"role":"assistant","content":"","tool_calls":[{"id":"c9","type":"function","function":{"name":"ls","arguments":"{\"a\":1}"}}]}}],
	"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":4}}}`

// TestConversationConverts: Eino's roles, tool calls, images and options
// become the OpenAI request the model reads; the answer's tool calls,
// finish reason and usage come back in Eino's terms.
func TestConversationConverts(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Body: toolCallBody})
	rt := runtime(t, srv)
	url := "https://x/a.png"
	cm, err := einosage.NewChatModel(rt.Client, einosage.ModelOptions{}).WithTools([]*schema.ToolInfo{{Name: "ls", Desc: "list",
		ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"path": {Type: schema.String, Required: true}})}})
	require.NoError(t, err)
	msg, err := cm.Generate(context.Background(), []*schema.Message{
		schema.SystemMessage("be brief"),
		{Role: schema.User, UserInputMultiContent: []schema.MessageInputPart{{Type: schema.ChatMessagePartTypeText, Text: "look"},
			{Type: schema.ChatMessagePartTypeImageURL, Image: &schema.MessageInputImage{MessagePartCommon: schema.MessagePartCommon{URL: &url}}}}},
		{Role: schema.Assistant, ToolCalls: []schema.ToolCall{{ID: "c1", Type: "function", Function: schema.FunctionCall{Name: "ls", Arguments: "{}"}}}},
		schema.ToolMessage("a.txt", "c1", schema.WithToolName("ls")),
	}, model.WithTemperature(0), model.WithMaxTokens(64), model.WithStop([]string{"END"}))
	require.NoError(t, err)
	require.Len(t, msg.ToolCalls, 1)
	assert.Equal(t, "c9", msg.ToolCalls[0].ID)
	assert.JSONEq(t, `{"a":1}`, msg.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "tool_calls", msg.ResponseMeta.FinishReason)
	assert.Equal(t, 12, msg.ResponseMeta.Usage.TotalTokens)
	assert.Equal(t, 4, msg.ResponseMeta.Usage.PromptTokenDetails.CachedTokens)

	body := srv.Last(t).JSON(t)
	assert.Equal(t, 0.0, body["temperature"], "an explicit zero is sent")
	assert.EqualValues(t, 64, body["max_completion_tokens"])
	assert.Equal(t, []any{"END"}, body["stop"])
	b, _ := json.Marshal(body["messages"])
	assert.JSONEq(t, `[{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
		{"role":"tool","content":"a.txt","name":"ls","tool_call_id":"c1"}]`, string(b))
	b, _ = json.Marshal(body["tools"])
	assert.JSONEq(t, `[{"type":"function","function":{"name":"ls","description":"list",
		"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]`, string(b))

	audio := &schema.Message{Role: schema.User, UserInputMultiContent: []schema.MessageInputPart{{Type: schema.ChatMessagePartTypeAudioURL}}}
	_, err = cm.Generate(context.Background(), []*schema.Message{audio})
	assert.ErrorContains(t, err, "einosage: message 0: a part of type audio_url is not supported")
}

// TestStreamSendsToolCallsLast: the stream carries the text as it comes
// and the assembled tool calls in its last message; eino's default
// checker (first chunk only) would miss them after text, the adapter's
// checker finds them.
func TestStreamSendsToolCallsLast(t *testing.T) {
	ev := llmtest.TextEvents("let me ", "look")
	ev = append(ev[:len(ev)-1], llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "c1", "ls", `{"pa`)), ""),
		llmtest.Chunk(0, llmtest.ToolCalls(llmtest.ToolCallDelta(0, "", "", `th":"."}`)), ""), llmtest.Chunk(0, `{}`, "tool_calls"))
	srv := llmtest.New(t, llmtest.Reply{Events: ev}, llmtest.Reply{Events: ev})
	rt := runtime(t, srv)
	cm := einosage.NewChatModel(rt.Client, einosage.ModelOptions{})
	sr, err := cm.Stream(context.Background(), []*schema.Message{schema.UserMessage("hi")})
	require.NoError(t, err)
	var msgs []*schema.Message
	for {
		m, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, 3)
	assert.Equal(t, "let me ", msgs[0].Content)
	assert.Empty(t, msgs[0].ToolCalls)
	last := msgs[2]
	require.Len(t, last.ToolCalls, 1)
	assert.Equal(t, `{"path":"."}`, last.ToolCalls[0].Function.Arguments)
	whole, err := schema.ConcatMessages(msgs)
	require.NoError(t, err)
	assert.Equal(t, "let me look", whole.Content)

	sr, err = cm.Stream(context.Background(), []*schema.Message{schema.UserMessage("hi")})
	require.NoError(t, err)
	ok, err := einosage.StreamToolCallChecker(context.Background(), sr)
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestToolFailureIsTheResult: a command the policy denies comes back as
// the error JSON the model reads, not as an error that would end Eino's
// graph; a cancelled context is an error.
func TestToolFailureIsTheResult(t *testing.T) {
	rt := runtime(t, llmtest.New(t))
	tools, err := einosage.Tools(rt.Tools)
	require.NoError(t, err)
	var shell *einosage.Tool
	for _, tl := range tools {
		info, err := tl.Info(context.Background())
		require.NoError(t, err)
		if info.Name == "execute_shell_command" {
			shell = tl.(*einosage.Tool)
			sch, err := info.ToJSONSchema()
			require.NoError(t, err)
			assert.Contains(t, sch.Required, "command", "the schema is the tool's own")
		}
	}
	require.NotNil(t, shell)
	out, err := shell.InvokableRun(context.Background(), `{"command":"sudo ls"}`)
	require.NoError(t, err)
	assert.Contains(t, out, `"error_code":"policy_denied"`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = shell.InvokableRun(ctx, `{"command":"echo hi"}`)
	assert.ErrorIs(t, err, context.Canceled)
}
