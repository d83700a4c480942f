package genkitsage_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	genkitsage "github.com/sage-go/sage/adapters/genkit"
	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/sage-go/sage/sagents/sage"
	"github.com/sage-go/sage/sagents/sage/sagetest"
)

// runtime is a passthrough runtime with a model on srv.
func runtime(t *testing.T, srv *llmtest.Server) *sage.Runtime {
	return sagetest.Passthrough(t, srv.URL, llmtest.Model)
}

// TestConversationConverts: Genkit's roles, tool requests and responses
// (a structured output as its JSON), media, tools and config become the
// OpenAI request the model reads; the answer's tool calls come back as
// tool request parts with their refs.
func TestConversationConverts(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Body: `{"id":"x","model":"fake-model","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":"","tool_calls":[{"id":"c9","type":"function","function":{"name":"ls","arguments":"{\"a\":1}"}}]}}],
		"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`})
	rt := runtime(t, srv)
	m := genkitsage.DefineModel(genkit.Init(context.Background()), "sage/test", rt.Client, genkitsage.ModelOptions{})
	resp, err := m.Generate(context.Background(), &ai.ModelRequest{
		Messages: []*ai.Message{
			ai.NewSystemTextMessage("be brief"),
			ai.NewUserMessage(ai.NewTextPart("look"), ai.NewMediaPart("image/png", "https://x/a.png")),
			ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: "ls", Ref: "c1", Input: map[string]any{"path": "."}})),
			ai.NewMessage(ai.RoleTool, nil, ai.NewToolResponsePart(&ai.ToolResponse{Name: "ls", Ref: "c1", Output: map[string]any{"files": 2}})),
		},
		Tools:  []*ai.ToolDefinition{{Name: "ls", Description: "list", InputSchema: map[string]any{"type": "object"}}},
		Config: &ai.GenerationCommonConfig{Temperature: 0.5, MaxOutputTokens: 64},
	}, nil)
	require.NoError(t, err)
	parts := resp.Message.Content
	require.Len(t, parts, 1)
	require.True(t, parts[0].IsToolRequest())
	assert.Equal(t, "c9", parts[0].ToolRequest.Ref)
	assert.Equal(t, map[string]any{"a": 1.0}, parts[0].ToolRequest.Input)
	assert.Equal(t, ai.FinishReasonStop, resp.FinishReason)
	assert.Equal(t, 12, resp.Usage.TotalTokens)

	body := srv.Last(t).JSON(t)
	assert.InDelta(t, 0.5, body["temperature"], 1e-6)
	assert.EqualValues(t, 64, body["max_completion_tokens"])
	b, _ := json.Marshal(body["messages"])
	assert.JSONEq(t, `[{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{\"path\":\".\"}"}}]},
		{"role":"tool","content":"{\"files\":2}","name":"ls","tool_call_id":"c1"}]`, string(b))
	b, _ = json.Marshal(body["tools"])
	assert.JSONEq(t, `[{"type":"function","function":{"name":"ls","description":"list","parameters":{"type":"object"}}}]`, string(b))
}

// TestStreamingCallback: with a callback the call streams and the text
// arrives piece by piece.
func TestStreamingCallback(t *testing.T) {
	srv := llmtest.New(t, llmtest.Text("he", "llo"))
	rt := runtime(t, srv)
	m := genkitsage.DefineModel(genkit.Init(context.Background()), "sage/test", rt.Client, genkitsage.ModelOptions{})
	var got []string
	resp, err := m.Generate(context.Background(), &ai.ModelRequest{Messages: []*ai.Message{ai.NewUserTextMessage("hi")}},
		func(_ context.Context, c *ai.ModelResponseChunk) error { got = append(got, c.Text()); return nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"he", "llo"}, got)
	assert.Equal(t, "hello", resp.Text())
	assert.Equal(t, true, srv.Last(t).JSON(t)["stream"])
}

// TestToolFailureIsTheOutput: a command the policy denies comes back as
// the error JSON the model reads, not as an error that would end the
// generation.
func TestToolFailureIsTheOutput(t *testing.T) {
	rt := runtime(t, llmtest.New(t))
	var shell ai.Tool
	for _, tl := range genkitsage.DefineTools(genkit.Init(context.Background()), rt.Tools) {
		if tl.Name() == "execute_shell_command" {
			shell = tl.(ai.Tool)
			assert.Contains(t, shell.Definition().InputSchema["required"], "command", "the schema is the tool's own")
		}
	}
	require.NotNil(t, shell)
	out, err := shell.RunRaw(context.Background(), map[string]any{"command": "sudo ls"})
	require.NoError(t, err)
	assert.Contains(t, out, `"error_code":"policy_denied"`)
}
