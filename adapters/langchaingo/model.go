package langchaingosage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
	"github.com/tmc/langchaingo/llms"

	"github.com/sage-go/sage/sagents/llm"
	"github.com/sage-go/sage/sagents/tools"
)

// ModelOptions configure a [Model].
type ModelOptions struct {
	// ModelType picks the client's standard or fast model.
	ModelType llm.ModelType
	// CacheKey, e.g. a session id, is the request's prompt cache key (see
	// llm.Request.CacheKey).
	CacheKey string
	// Tools, when set, gives the real JSON Schema of each of its tools
	// that an agent offers with LangChainGo's one-string "__arg1" schema.
	Tools *tools.Manager
}

// Model is an llms.Model backed by an llm.Client. It is safe for
// concurrent use.
type Model struct {
	c *llm.Client
	o ModelOptions
}

var _ llms.Model = (*Model)(nil)

// NewModel returns a Model that sends every call through c (give c the
// runtime's Observer to see the calls in the trace).
func NewModel(c *llm.Client, o ModelOptions) *Model { return &Model{c: c, o: o} }

// Call sends one user message and returns the text of the answer.
func (m *Model) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// GenerateContent sends one chat call, streamed when the options carry a
// streaming function.
func (m *Model) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var o llms.CallOptions
	for _, opt := range options {
		opt(&o)
	}
	req, err := m.request(messages, o)
	if err != nil {
		return nil, err
	}
	var resp *llm.Response
	if o.StreamingFunc == nil && o.StreamingReasoningFunc == nil {
		resp, err = m.c.Chat(ctx, req)
	} else {
		resp, err = m.stream(ctx, req, o)
	}
	if err != nil {
		return nil, err
	}
	return fromResponse(resp), nil
}

func (m *Model) stream(ctx context.Context, req llm.Request, o llms.CallOptions) (*llm.Response, error) {
	s, err := m.c.ChatStream(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.CollectDeltas(func(content, reasoning string) error {
		var err error
		if o.StreamingReasoningFunc != nil {
			err = o.StreamingReasoningFunc(ctx, []byte(reasoning), []byte(content))
		} else if content != "" {
			err = o.StreamingFunc(ctx, []byte(content))
		}
		if err != nil {
			return fmt.Errorf("langchaingosage: streaming function: %w", err)
		}
		return nil
	})
}

func (m *Model) request(in []llms.MessageContent, o llms.CallOptions) (llm.Request, error) {
	var msgs []llm.Message
	for i, mc := range in {
		ms, err := toMessages(mc)
		if err != nil {
			return llm.Request{}, fmt.Errorf("langchaingosage: message %d: %w", i, err)
		}
		msgs = append(msgs, ms...)
	}
	req := llm.NewRequest(msgs...)
	for _, t := range o.Tools {
		if t.Function != nil {
			req.Tools = append(req.Tools, m.tool(*t.Function))
		}
	}
	for _, f := range o.Functions {
		req.Tools = append(req.Tools, m.tool(f))
	}
	req = req.WithStablePrefix()
	req.ModelType, req.CacheKey = m.o.ModelType, m.o.CacheKey
	if o.Temperature > 0 {
		req.Temperature = new(float32(o.Temperature))
	}
	if o.TopP > 0 {
		req.TopP = new(float32(o.TopP))
	}
	req.MaxCompletionTokens, req.Stop, req.N = o.MaxTokens, o.StopWords, o.N
	if o.Seed != 0 {
		req.Seed = new(o.Seed)
	}
	req.FrequencyPenalty, req.PresencePenalty = float32(o.FrequencyPenalty), float32(o.PresencePenalty)
	if o.JSONMode {
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	if len(req.Tools) > 0 {
		switch c := o.ToolChoice.(type) {
		case string:
			req.ToolChoice = c
		case llms.ToolChoice:
			req.ToolChoice = toolChoice(c)
		case *llms.ToolChoice:
			if c != nil {
				req.ToolChoice = toolChoice(*c)
			}
		}
	}
	return req, nil
}

func toolChoice(c llms.ToolChoice) any {
	if c.Function == nil {
		return c.Type
	}
	return openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: c.Function.Name}}
}

// tool turns a function definition into a tool, with the sage tool's own
// schema in place of the one-string "__arg1" schema.
func (m *Model) tool(f llms.FunctionDefinition) llm.ToolDefinition {
	if m.o.Tools != nil && isArg1(f.Parameters) {
		for _, s := range m.o.Tools.Specs() {
			if s.Name == f.Name {
				return llm.FunctionTool(f.Name, f.Description, s.Parameters)
			}
		}
	}
	params, err := json.Marshal(f.Parameters)
	if err != nil || f.Parameters == nil {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return llm.FunctionTool(f.Name, f.Description, params)
}

// isArg1 reports whether params is LangChainGo's one-string schema, whose
// only property is "__arg1".
func isArg1(params any) bool {
	b, err := json.Marshal(params)
	if err != nil {
		return false
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil || len(s.Properties) != 1 {
		return false
	}
	_, ok := s.Properties["__arg1"]
	return ok
}

// toMessages converts one LangChainGo message: a tool message with
// several responses is one OpenAI tool message each.
func toMessages(mc llms.MessageContent) ([]llm.Message, error) {
	var out []llm.Message
	msg := llm.Message{}
	var parts []llm.MessagePart
	for _, p := range mc.Parts {
		switch p := p.(type) {
		case llms.TextContent:
			parts = append(parts, llm.TextPart(p.Text))
		case llms.ImageURLContent:
			img := llm.ImagePart(p.URL)
			img.ImageURL.Detail = openai.ImageURLDetail(p.Detail)
			parts = append(parts, img)
		case llms.BinaryContent:
			if !strings.HasPrefix(p.MIMEType, "image/") {
				return nil, fmt.Errorf("binary content of type %q is not supported (images are)", p.MIMEType)
			}
			parts = append(parts, llm.ImagePart(p.String()))
		case llms.ToolCall:
			if p.FunctionCall == nil {
				return nil, errors.New("a tool call without a function")
			}
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: p.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: p.FunctionCall.Name, Arguments: p.FunctionCall.Arguments}})
		case llms.ToolCallResponse:
			out = append(out, llm.ToolMessage(p.ToolCallID, p.Name, p.Content))
		default:
			return nil, fmt.Errorf("a %T part is not supported", p)
		}
	}
	if len(out) > 0 { // tool responses
		return out, nil
	}
	switch mc.Role {
	case llms.ChatMessageTypeSystem:
		msg.Role = llm.RoleSystem
	case llms.ChatMessageTypeHuman, llms.ChatMessageTypeGeneric:
		msg.Role = llm.RoleUser
	case llms.ChatMessageTypeAI:
		msg.Role = llm.RoleAssistant
	default:
		return nil, fmt.Errorf("role %q without tool responses", mc.Role)
	}
	llm.SetContent(&msg, parts)
	return []llm.Message{msg}, nil
}

func fromResponse(resp *llm.Response) *llms.ContentResponse {
	out := &llms.ContentResponse{}
	for _, ch := range resp.Choices {
		c := &llms.ContentChoice{Content: ch.Message.Content, ReasoningContent: ch.Message.ReasoningContent,
			StopReason: string(ch.FinishReason), GenerationInfo: map[string]any{
				"PromptTokens": resp.Usage.Input, "CompletionTokens": resp.Usage.Output, "TotalTokens": resp.Usage.Total,
				"ReasoningTokens": resp.Usage.Reasoning, "PromptCachedTokens": resp.Usage.Cached,
			}}
		for _, tc := range ch.ToolCalls {
			c.ToolCalls = append(c.ToolCalls, llms.ToolCall{ID: tc.ID, Type: "function",
				FunctionCall: &llms.FunctionCall{Name: tc.Name, Arguments: tc.ArgumentsText()}})
		}
		if len(c.ToolCalls) > 0 {
			c.FuncCall = c.ToolCalls[0].FunctionCall
		}
		out.Choices = append(out.Choices, c)
	}
	return out
}
