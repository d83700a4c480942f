package genkitsage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	openai "github.com/sashabaranov/go-openai"

	"github.com/sage-go/sage/sagents/llm"
)

// ModelOptions configure the model [DefineModel] defines.
type ModelOptions struct {
	// ModelType picks the client's standard or fast model.
	ModelType llm.ModelType
	// CacheKey, e.g. a session id, is the request's prompt cache key (see
	// llm.Request.CacheKey).
	CacheKey string
	// Label names the model in Genkit's tools; empty: "sage " and the
	// client's model name.
	Label string
}

// DefineModel defines a Genkit model of g named name (for example
// "sage/standard") whose every call goes through c (give c the runtime's
// Observer to see the calls in the trace). Its config may be an
// *ai.GenerationCommonConfig (temperature, top_p, max output tokens,
// stop sequences).
func DefineModel(g *genkit.Genkit, name string, c *llm.Client, o ModelOptions) ai.Model {
	label := o.Label
	if label == "" {
		label = "sage " + c.Model(o.ModelType)
	}
	return genkit.DefineModel(g, name, &ai.ModelOptions{Label: label, Supports: &ai.ModelSupports{
		Multiturn: true, Tools: true, SystemRole: true, Media: true, ToolChoice: true}},
		func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			r, err := request(req, o)
			if err != nil {
				return nil, err
			}
			var resp *llm.Response
			if cb == nil {
				resp, err = c.Chat(ctx, r)
			} else {
				resp, err = stream(ctx, c, r, cb)
			}
			if err != nil {
				return nil, err
			}
			return fromResponse(req, resp)
		})
}

func stream(ctx context.Context, c *llm.Client, r llm.Request, cb ai.ModelStreamCallback) (*llm.Response, error) {
	s, err := c.ChatStream(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.CollectDeltas(func(content, _ string) error {
		if content == "" {
			return nil
		}
		return cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: []*ai.Part{ai.NewTextPart(content)}})
	})
}

func request(req *ai.ModelRequest, o ModelOptions) (llm.Request, error) {
	var msgs []llm.Message
	for i, m := range req.Messages {
		ms, err := toMessages(m)
		if err != nil {
			return llm.Request{}, fmt.Errorf("genkitsage: message %d: %w", i, err)
		}
		msgs = append(msgs, ms...)
	}
	r := llm.NewRequest(msgs...)
	for _, t := range req.Tools {
		params := json.RawMessage(`{"type":"object","properties":{}}`)
		if t.InputSchema != nil {
			b, err := json.Marshal(t.InputSchema)
			if err != nil {
				return llm.Request{}, fmt.Errorf("genkitsage: tool %s: schema: %w", t.Name, err)
			}
			params = b
		}
		r.Tools = append(r.Tools, llm.FunctionTool(t.Name, t.Description, params))
	}
	r = r.WithStablePrefix()
	r.ModelType, r.CacheKey = o.ModelType, o.CacheKey
	if len(r.Tools) > 0 {
		switch req.ToolChoice {
		case ai.ToolChoiceNone:
			r.ToolChoice = "none"
		case ai.ToolChoiceRequired:
			r.ToolChoice = "required"
		case ai.ToolChoiceAuto:
			r.ToolChoice = "auto"
		}
	}
	if cfg, ok := req.Config.(*ai.GenerationCommonConfig); ok && cfg != nil {
		if cfg.Temperature > 0 {
			r.Temperature = new(float32(cfg.Temperature))
		}
		if cfg.TopP > 0 {
			r.TopP = new(float32(cfg.TopP))
		}
		r.MaxCompletionTokens, r.Stop = cfg.MaxOutputTokens, cfg.StopSequences
	}
	return r, nil
}

// toMessages converts one Genkit message: a tool message with several
// responses is one OpenAI tool message each.
func toMessages(m *ai.Message) ([]llm.Message, error) {
	var tools []llm.Message
	msg := llm.Message{}
	var parts []llm.MessagePart
	for _, p := range m.Content {
		switch {
		case p.IsText():
			parts = append(parts, llm.TextPart(p.Text))
		case p.IsMedia() && (p.ContentType == "" || strings.HasPrefix(p.ContentType, "image/")):
			parts = append(parts, llm.ImagePart(p.Text))
		case p.IsReasoning():
			msg.ReasoningContent += p.Text
		case p.IsToolRequest():
			args, err := json.Marshal(p.ToolRequest.Input)
			if err != nil {
				return nil, fmt.Errorf("tool request %s: %w", p.ToolRequest.Name, err)
			}
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: p.ToolRequest.Ref, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: p.ToolRequest.Name, Arguments: string(args)}})
		case p.IsToolResponse():
			out, ok := p.ToolResponse.Output.(string)
			if !ok {
				b, err := json.Marshal(p.ToolResponse.Output)
				if err != nil {
					return nil, fmt.Errorf("tool response %s: %w", p.ToolResponse.Name, err)
				}
				out = string(b)
			}
			tools = append(tools, llm.ToolMessage(p.ToolResponse.Ref, p.ToolResponse.Name, out))
		default:
			return nil, fmt.Errorf("a part of kind %d (%s) is not supported (text, images, reasoning and tool parts are)", p.Kind, p.ContentType)
		}
	}
	if len(tools) > 0 {
		return tools, nil
	}
	switch m.Role {
	case ai.RoleSystem:
		msg.Role = llm.RoleSystem
	case ai.RoleUser:
		msg.Role = llm.RoleUser
	case ai.RoleModel:
		msg.Role = llm.RoleAssistant
	default:
		return nil, fmt.Errorf("role %q without tool responses", m.Role)
	}
	llm.SetContent(&msg, parts)
	return []llm.Message{msg}, nil
}

func fromResponse(req *ai.ModelRequest, resp *llm.Response) (*ai.ModelResponse, error) {
	if len(resp.Choices) == 0 {
		return nil, errors.New("genkitsage: the model returned no choices")
	}
	ch := resp.Choices[0]
	msg := &ai.Message{Role: ai.RoleModel}
	if ch.Message.ReasoningContent != "" {
		msg.Content = append(msg.Content, ai.NewReasoningPart(ch.Message.ReasoningContent, nil))
	}
	if ch.Message.Content != "" {
		msg.Content = append(msg.Content, ai.NewTextPart(ch.Message.Content))
	}
	for _, tc := range ch.ToolCalls {
		var input any
		if err := json.Unmarshal([]byte(tc.ArgumentsText()), &input); err != nil {
			input = tc.ArgumentsText() // the tool reports the invalid arguments
		}
		msg.Content = append(msg.Content, ai.NewToolRequestPart(&ai.ToolRequest{Name: tc.Name, Ref: tc.ID, Input: input}))
	}
	finish := ai.FinishReasonOther
	switch ch.FinishReason {
	case "stop", "tool_calls", "function_call":
		finish = ai.FinishReasonStop
	case "length":
		finish = ai.FinishReasonLength
	case "content_filter":
		finish = ai.FinishReasonBlocked
	}
	return &ai.ModelResponse{Request: req, Message: msg, FinishReason: finish, LatencyMs: float64(resp.Latency.Milliseconds()),
		Usage: &ai.GenerationUsage{InputTokens: resp.Usage.Input, OutputTokens: resp.Usage.Output, TotalTokens: resp.Usage.Total,
			CachedContentTokens: resp.Usage.Cached, ThoughtsTokens: resp.Usage.Reasoning}}, nil
}
