package langchaingosage_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/llms"

	langchaingosage "github.com/sage-go/sage/adapters/langchaingo"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/sage"
	"github.com/sage-go/sage/sagents/sage/sagetest"
)

// runtime is a passthrough runtime with a model on srv.
func runtime(t *testing.T, srv *llmtest.Server) *sage.Runtime {
	return sagetest.Passthrough(t, srv.URL, llmtest.Model)
}

// sentTools returns the parameters of each tool of the last request, by
// name.
func sentTools(t *testing.T, srv *llmtest.Server) map[string]json.RawMessage {
	var body struct {
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(srv.Last(t).Body, &body))
	out := map[string]json.RawMessage{}
	for _, tl := range body.Tools {
		out[tl.Function.Name] = tl.Function.Parameters
	}
	return out
}

// TestFunctionsAgentSeesTheRealSchema: the OpenAI functions agent offers
// every tool with a one-string "__arg1" schema; with ModelOptions.Tools
// the model is sent each sage tool's own schema (the control: without
// it, the model would see only "__arg1").
func TestFunctionsAgentSeesTheRealSchema(t *testing.T) {
	srv := llmtest.New(t, llmtest.Chat("done"), llmtest.Chat("done"))
	rt := runtime(t, srv)
	ctx := context.Background()
	spec := rt.Tools.Specs()[0]
	for _, withTools := range []bool{true, false} {
		o := langchaingosage.ModelOptions{}
		if withTools {
			o.Tools = rt.Tools
		}
		ag := agents.NewOpenAIFunctionsAgent(langchaingosage.NewModel(rt.Client, o), langchaingosage.Tools(rt.Tools))
		_, fin, err := ag.Plan(ctx, nil, map[string]string{"input": "go"})
		require.NoError(t, err)
		assert.Equal(t, "done", fin.ReturnValues["output"])
		sent := sentTools(t, srv)
		require.Len(t, sent, len(rt.Tools.Specs()))
		if withTools {
			assert.JSONEq(t, string(spec.Parameters), string(sent[spec.Name]))
		} else {
			assert.Contains(t, string(sent[spec.Name]), "__arg1")
		}
	}
}

// TestConversationConverts: LangChainGo's roles and parts become the
// OpenAI messages the model reads; the tool calls of the answer come back
// with their ids.
func TestConversationConverts(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Body: `{"id":"x","model":"fake-model","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":"","tool_calls":[{"id":"c9","type":"function","function":{"name":"ls","arguments":"{\"a\":1}"}}]}}],
		"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`})
	rt := runtime(t, srv)
	m := langchaingosage.NewModel(rt.Client, langchaingosage.ModelOptions{})
	resp, err := m.GenerateContent(context.Background(), []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "be brief"),
		{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "look"}, llms.ImageURLContent{URL: "https://x/a.png"}}},
		{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.ToolCall{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "ls", Arguments: "{}"}},
			llms.ToolCall{ID: "c2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "cat", Arguments: "{}"}}}},
		{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: "c1", Name: "ls", Content: "a.txt"},
			llms.ToolCallResponse{ToolCallID: "c2", Name: "cat", Content: "hi"}}},
	}, llms.WithTemperature(0.5), llms.WithMaxTokens(64))
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	c := resp.Choices[0]
	require.Len(t, c.ToolCalls, 1)
	assert.Equal(t, "c9", c.ToolCalls[0].ID)
	assert.JSONEq(t, `{"a":1}`, c.ToolCalls[0].FunctionCall.Arguments)
	assert.Equal(t, "tool_calls", c.StopReason)
	assert.Equal(t, 12, c.GenerationInfo["TotalTokens"])

	body := srv.Last(t).JSON(t)
	assert.InDelta(t, 0.5, body["temperature"], 1e-6)
	assert.EqualValues(t, 64, body["max_completion_tokens"])
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 5, "two tool responses are two tool messages")
	b, _ := json.Marshal(msgs)
	assert.JSONEq(t, `[{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"cat","arguments":"{}"}}]},
		{"role":"tool","content":"a.txt","name":"ls","tool_call_id":"c1"},{"role":"tool","content":"hi","name":"cat","tool_call_id":"c2"}]`, string(b))

	_, err = m.GenerateContent(context.Background(), []llms.MessageContent{{Role: llms.ChatMessageTypeHuman,
		Parts: []llms.ContentPart{llms.BinaryContent{MIMEType: "audio/wav", Data: []byte{1}}}}})
	assert.ErrorContains(t, err, `binary content of type "audio/wav" is not supported`)
}

// TestStreamingFunc: with a streaming function the call streams, the text
// arrives piece by piece and the answer is the whole of it.
func TestStreamingFunc(t *testing.T) {
	srv := llmtest.New(t, llmtest.Text("he", "llo"))
	rt := runtime(t, srv)
	var got []string
	resp, err := langchaingosage.NewModel(rt.Client, langchaingosage.ModelOptions{}).GenerateContent(context.Background(),
		[]llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")},
		llms.WithStreamingFunc(func(_ context.Context, b []byte) error { got = append(got, string(b)); return nil }))
	require.NoError(t, err)
	assert.Equal(t, []string{"he", "llo"}, got)
	assert.Equal(t, "hello", resp.Choices[0].Content)
	assert.Equal(t, true, srv.Last(t).JSON(t)["stream"])
}

// TestToolFailureIsAnObservation: a command the policy denies comes back
// as the error JSON the model reads, not as an error that would end the
// executor; a cancelled context is an error.
func TestToolFailureIsAnObservation(t *testing.T) {
	rt := runtime(t, llmtest.New(t))
	var shell interface {
		Call(context.Context, string) (string, error)
	}
	for _, tl := range langchaingosage.Tools(rt.Tools) {
		if tl.Name() == "execute_shell_command" {
			shell = tl
			assert.Contains(t, tl.Description(), `"command"`, "the description carries the schema")
		}
	}
	require.NotNil(t, shell)
	out, err := shell.Call(context.Background(), `{"command":"sudo ls"}`)
	require.NoError(t, err)
	assert.Contains(t, out, `"error_code":"policy_denied"`)
	out, err = shell.Call(context.Background(), `not json`)
	require.NoError(t, err)
	assert.Contains(t, out, `"error_code":"invalid_arguments"`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = shell.Call(ctx, `{"command":"echo hi"}`)
	assert.ErrorIs(t, err, context.Canceled)
}
