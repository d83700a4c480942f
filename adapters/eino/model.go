package einosage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	openai "github.com/sashabaranov/go-openai"

	"github.com/sage-go/sage/sagents/llm"
)

// ModelOptions configure a [ChatModel].
type ModelOptions struct {
	// ModelType picks the client's standard or fast model.
	ModelType llm.ModelType
	// CacheKey, e.g. a session id, is the request's prompt cache key (see
	// llm.Request.CacheKey).
	CacheKey string
}

// ChatModel is an Eino model.ToolCallingChatModel backed by an
// llm.Client. It is safe for concurrent use; WithTools returns a copy.
type ChatModel struct {
	c     *llm.Client
	o     ModelOptions
	tools []*schema.ToolInfo
}

var _ model.ToolCallingChatModel = (*ChatModel)(nil)

// NewChatModel returns a ChatModel that sends every call through c (give
// c the runtime's Observer to see the calls in the trace).
func NewChatModel(c *llm.Client, o ModelOptions) *ChatModel { return &ChatModel{c: c, o: o} }

// WithTools returns a copy of m offering tools to the model.
func (m *ChatModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	if _, err := toolDefinitions(tools); err != nil {
		return nil, err
	}
	cp := *m
	cp.tools = tools
	return &cp, nil
}

// GetType names the component in Eino's callbacks.
func (m *ChatModel) GetType() string { return "Sage" }

// Generate sends one chat call and returns the assistant message.
func (m *ChatModel) Generate(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	req, err := m.request(in, opts)
	if err != nil {
		return nil, err
	}
	resp, err := m.c.Chat(ctx, req)
	if err != nil {
		return nil, err
	}
	return fromResponse(resp)
}

// Stream sends one streaming chat call. Text and reasoning arrive as they
// are streamed; the last message holds the assembled tool calls, the
// finish reason and the usage.
func (m *ChatModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	req, err := m.request(in, opts)
	if err != nil {
		return nil, err
	}
	s, err := m.c.ChatStream(ctx, req)
	if err != nil {
		return nil, err
	}
	sr, sw := schema.Pipe[*schema.Message](8)
	go func() {
		defer sw.Close()
		resp, err := s.CollectDeltas(func(content, reasoning string) error {
			if sw.Send(&schema.Message{Role: schema.Assistant, Content: content, ReasoningContent: reasoning}, nil) {
				return errReaderClosed
			}
			return nil
		})
		if errors.Is(err, errReaderClosed) {
			return
		}
		if err != nil {
			sw.Send(nil, err)
			return
		}
		last, err := fromResponse(resp)
		if err == nil {
			last.Content, last.ReasoningContent = "", "" // sent already
		}
		sw.Send(last, err)
	}()
	return sr, nil
}

// errReaderClosed stops a stream whose reader was closed.
var errReaderClosed = errors.New("einosage: the stream's reader was closed")

// request builds the llm request: messages, tools (bound or given as an
// option) and the common options.
func (m *ChatModel) request(in []*schema.Message, opts []model.Option) (llm.Request, error) {
	o := model.GetCommonOptions(&model.Options{Tools: m.tools}, opts...)
	msgs := make([]llm.Message, 0, len(in))
	for i, msg := range in {
		lm, err := toMessage(msg)
		if err != nil {
			return llm.Request{}, fmt.Errorf("einosage: message %d: %w", i, err)
		}
		msgs = append(msgs, lm)
	}
	req := llm.NewRequest(msgs...)
	defs, err := toolDefinitions(o.Tools)
	if err != nil {
		return llm.Request{}, err
	}
	req.Tools = defs
	req = req.WithStablePrefix()
	req.ModelType, req.CacheKey = m.o.ModelType, m.o.CacheKey
	req.Temperature, req.TopP = o.Temperature, o.TopP
	if o.MaxTokens != nil {
		req.MaxCompletionTokens = *o.MaxTokens
	}
	req.Stop = o.Stop
	if o.ToolChoice != nil && len(defs) > 0 {
		switch *o.ToolChoice {
		case schema.ToolChoiceForbidden:
			req.ToolChoice = "none"
		case schema.ToolChoiceForced:
			req.ToolChoice = "required"
		case schema.ToolChoiceAllowed:
			req.ToolChoice = "auto"
		}
	}
	return req, nil
}

func toolDefinitions(infos []*schema.ToolInfo) ([]llm.ToolDefinition, error) {
	var out []llm.ToolDefinition
	for _, ti := range infos {
		var params json.RawMessage
		sch, err := ti.ToJSONSchema()
		if err == nil && sch != nil {
			params, err = json.Marshal(sch)
		}
		if err != nil {
			return nil, fmt.Errorf("einosage: tool %s: schema: %w", ti.Name, err)
		}
		if params == nil {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, llm.FunctionTool(ti.Name, ti.Desc, params))
	}
	return out, nil
}

// toMessage converts one Eino message. Text and images are carried;
// audio, video and file parts are refused rather than dropped.
func toMessage(m *schema.Message) (llm.Message, error) {
	out := llm.Message{Content: m.Content, Name: m.Name, ReasoningContent: m.ReasoningContent}
	switch m.Role {
	case schema.System:
		out.Role = llm.RoleSystem
	case schema.User:
		out.Role = llm.RoleUser
	case schema.Assistant:
		out.Role = llm.RoleAssistant
		for _, tc := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	case schema.Tool:
		out.Role, out.ToolCallID, out.Name = llm.RoleTool, m.ToolCallID, m.ToolName
	default:
		return llm.Message{}, fmt.Errorf("role %q is not system, user, assistant or tool", m.Role)
	}
	parts, err := contentParts(m)
	if err != nil {
		return llm.Message{}, err
	}
	if len(parts) > 0 {
		if out.Content != "" {
			parts = append([]llm.MessagePart{llm.TextPart(out.Content)}, parts...)
		}
		llm.SetContent(&out, parts)
	}
	return out, nil
}

func contentParts(m *schema.Message) ([]llm.MessagePart, error) {
	var out []llm.MessagePart
	for _, p := range m.UserInputMultiContent {
		switch {
		case p.Type == schema.ChatMessagePartTypeText:
			out = append(out, llm.TextPart(p.Text))
		case p.Type == schema.ChatMessagePartTypeImageURL && p.Image != nil && p.Image.URL != nil:
			out = append(out, llm.ImagePart(*p.Image.URL))
		case p.Type == schema.ChatMessagePartTypeImageURL && p.Image != nil && p.Image.Base64Data != nil:
			out = append(out, llm.ImagePart("data:"+p.Image.MIMEType+";base64,"+*p.Image.Base64Data))
		default:
			return nil, fmt.Errorf("a part of type %s is not supported (text and images are)", p.Type)
		}
	}
	for _, p := range m.MultiContent {
		switch {
		case p.Type == schema.ChatMessagePartTypeText:
			out = append(out, llm.TextPart(p.Text))
		case p.Type == schema.ChatMessagePartTypeImageURL && p.ImageURL != nil:
			out = append(out, llm.ImagePart(p.ImageURL.URL))
		default:
			return nil, fmt.Errorf("a part of type %s is not supported (text and images are)", p.Type)
		}
	}
	return out, nil
}

// fromResponse converts the first choice of resp.
func fromResponse(resp *llm.Response) (*schema.Message, error) {
	if resp == nil || len(resp.Choices) == 0 {
		return nil, errors.New("einosage: the model returned no choices")
	}
	ch := resp.Choices[0]
	out := &schema.Message{Role: schema.Assistant, Content: ch.Message.Content, ReasoningContent: ch.Message.ReasoningContent,
		ResponseMeta: &schema.ResponseMeta{FinishReason: string(ch.FinishReason), Usage: &schema.TokenUsage{
			PromptTokens: resp.Usage.Input, CompletionTokens: resp.Usage.Output, TotalTokens: resp.Usage.Total,
			PromptTokenDetails:      schema.PromptTokenDetails{CachedTokens: resp.Usage.Cached},
			CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: resp.Usage.Reasoning},
		}}}
	for i, tc := range ch.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, schema.ToolCall{Index: &i, ID: tc.ID, Type: "function",
			Function: schema.FunctionCall{Name: tc.Name, Arguments: tc.ArgumentsText()}})
	}
	return out, nil
}

// StreamToolCallChecker is a react.AgentConfig.StreamToolCallChecker for a
// ChatModel's streams, whose tool calls come in the last message (Eino's
// default looks at the first chunk only, which misses a model that
// writes text before calling a tool). It reads until a message holds a
// tool call or the stream ends, and closes it.
func StreamToolCallChecker(_ context.Context, sr *schema.StreamReader[*schema.Message]) (bool, error) {
	defer sr.Close()
	for {
		m, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(m.ToolCalls) > 0 {
			return true, nil
		}
	}
}
