package llm

import (
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
)

func plain(model string, caps Capabilities) target {
	return target{model: model, baseURL: "http://127.0.0.1:1/v1", caps: caps}
}

func TestRuleDropEmptyNumbers(t *testing.T) {
	r := req("x")
	r.MaxTokens, r.N = -1, -3
	r.ExtraBody = map[string]any{"top_k": nil, "min_p": 0.1}
	p := sanitize(r, plain("m", Capabilities{}))
	assert.Zero(t, p.req.MaxTokens)
	assert.Zero(t, p.req.N)
	assert.Equal(t, map[string]any{"min_p": 0.1}, p.patch.set)
}

func TestRuleReasoningMaxTokens(t *testing.T) {
	for _, m := range []string{"o1-mini", "o3", "o4-mini", "gpt-5", "gpt-5-nano", "openai/o3-mini"} {
		r := req("x")
		r.MaxTokens = 100
		p := sanitize(r, plain(m, Capabilities{}))
		assert.Zero(t, p.req.MaxTokens, m)
		assert.Equal(t, 100, p.req.MaxCompletionTokens, m)
	}
	r := req("x")
	r.MaxTokens = 100
	p := sanitize(r, plain("gpt-4o", Capabilities{}))
	assert.Equal(t, 100, p.req.MaxTokens, "non-reasoning models keep max_tokens")
}

func TestRuleReasoningSampling(t *testing.T) {
	r := req("x")
	r.ChatCompletionRequest.Temperature, r.ChatCompletionRequest.TopP = 0.3, 0.9
	r.PresencePenalty, r.FrequencyPenalty, r.LogProbs = 0.5, 0.5, true
	r.Temperature = ptr(float32(0))
	p := sanitize(r, plain("o3-mini", Capabilities{}))
	assert.Zero(t, p.req.Temperature)
	assert.Zero(t, p.req.TopP)
	assert.Zero(t, p.req.PresencePenalty)
	assert.Zero(t, p.req.FrequencyPenalty)
	assert.False(t, p.req.LogProbs)
	assert.NotContains(t, p.patch.set, "temperature")
	// go-openai's validator accepts what we send.
	assert.NoError(t, openai.NewReasoningValidator().Validate(p.req))

	p = sanitize(r, plain("gpt-4.1", Capabilities{}))
	assert.Equal(t, float32(0.3), p.req.Temperature)
	assert.Equal(t, float32(0), p.patch.set["temperature"])
}

func TestRuleStructuredOutput(t *testing.T) {
	r := req("x")
	r.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	assert.NotNil(t, sanitize(r, plain("m", Capabilities{})).req.ResponseFormat, "unknown never strips")
	assert.NotNil(t, sanitize(r, plain("m", Capabilities{StructuredOutput: Supported})).req.ResponseFormat)
	assert.Nil(t, sanitize(r, plain("m", Capabilities{StructuredOutput: Unsupported})).req.ResponseFormat)
}

func imageRequest() Request {
	r := req("")
	r.Messages = []openai.ChatCompletionMessage{{Role: "user", MultiContent: []openai.ChatMessagePart{
		{Type: openai.ChatMessagePartTypeText, Text: "what is this?"},
		{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,AA=="}},
	}}}
	return r
}

func TestRuleImages(t *testing.T) {
	r := imageRequest()
	assert.Len(t, sanitize(r, plain("m", Capabilities{})).req.Messages[0].MultiContent, 2, "unknown never strips")
	p := sanitize(r, plain("m", Capabilities{Multimodal: Unsupported}))
	assert.Nil(t, p.req.Messages[0].MultiContent)
	assert.Equal(t, "what is this?\n"+imageOmitted, p.req.Messages[0].Content)
	assert.Len(t, r.Messages[0].MultiContent, 2, "the caller's request is not mutated")
}

func TestRuleReasoningEffortAndTools(t *testing.T) {
	r := req("x")
	r.ReasoningEffort = "high"
	r.Tools = []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{Name: "f"}}}
	r.ToolChoice = "auto"
	p := sanitize(r, plain("m", Capabilities{}))
	assert.Equal(t, "high", p.req.ReasoningEffort)
	assert.Len(t, p.req.Tools, 1)
	p = sanitize(r, plain("m", Capabilities{ReasoningEffort: Unsupported, Tools: Unsupported}))
	assert.Empty(t, p.req.ReasoningEffort)
	assert.Nil(t, p.req.Tools)
	assert.Nil(t, p.req.ToolChoice)
}

func TestRuleDeepSeek(t *testing.T) {
	r := req("x")
	r.ToolChoice = "auto"
	ds := target{model: "deepseek-reasoner", baseURL: "https://api.deepseek.com/v1"}
	p := sanitize(r, ds)
	assert.Nil(t, p.req.ToolChoice, "no tool_choice with thinking")
	assert.True(t, p.patch.fillReasoningContent)

	ds.model = "deepseek-chat"
	p = sanitize(r, ds)
	assert.Equal(t, "auto", p.req.ToolChoice, "chat mode keeps tool_choice")

	r.ExtraBody = map[string]any{"thinking": map[string]any{"type": "enabled"}}
	assert.Nil(t, sanitize(r, ds).req.ToolChoice, "thinking enabled through extra_body")

	other := target{model: "deepseek-reasoner", baseURL: "http://127.0.0.1:8000/v1"}
	p = sanitize(r, other)
	assert.Equal(t, "auto", p.req.ToolChoice, "only DeepSeek's own host")
	assert.False(t, p.patch.fillReasoningContent)
}

func TestSanitizeSetsConfiguredModel(t *testing.T) {
	r := req("x")
	r.Model = "caller-model"
	assert.Equal(t, "configured", sanitize(r, plain("configured", Capabilities{})).req.Model)
}
