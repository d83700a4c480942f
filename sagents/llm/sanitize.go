package llm

import (
	"net/url"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// target is what sanitising needs to know about the model.
type target struct {
	model   string
	baseURL string
	caps    Capabilities
	// cacheMode is the resolved prompt-cache mode; "" means off.
	cacheMode PromptCacheMode
}

// plan is a sanitised request: the struct go-openai marshals and the patch the
// transport applies to its JSON.
type plan struct {
	req   openai.ChatCompletionRequest
	patch bodyPatch
	// explicit sampling values, moved into the patch last
	temperature, topP *float32
}

// rule is one sanitising step. Each rule is small and tested on its own.
type rule func(p *plan, t target)

// rules run in this order.
var rules = []rule{
	ruleDropEmptyNumbers,
	ruleReasoningMaxTokens,
	ruleReasoningSampling,
	ruleStructuredOutput,
	ruleImages,
	ruleReasoningEffort,
	ruleTools,
	ruleDeepSeek,
}

// sanitize returns the request to send. It never mutates r.
func sanitize(r Request, t target) plan {
	p := plan{req: r.ChatCompletionRequest, temperature: r.Temperature, topP: r.TopP}
	p.req.Model = t.model
	p.req.Messages = cloneMessages(r.Messages)
	p.patch.set = make(map[string]any, len(r.ExtraBody)+2)
	for k, v := range r.ExtraBody {
		p.patch.set[k] = v
	}
	for _, apply := range rules {
		apply(&p, t)
	}
	// After the rules: breakpoints are placed on the content sent.
	rulePromptCache(&p, t, cacheRequest{marks: r.Stability, tools: r.ToolsStability, key: r.CacheKey, extraKeys: r.ExtraBody})
	if p.temperature != nil {
		p.patch.set["temperature"] = *p.temperature
	}
	if p.topP != nil {
		p.patch.set["top_p"] = *p.topP
	}
	return p
}

func cloneMessages(in []openai.ChatCompletionMessage) []openai.ChatCompletionMessage {
	if in == nil {
		return nil
	}
	return append([]openai.ChatCompletionMessage(nil), in...)
}

// ruleDropEmptyNumbers drops nil extra fields and negative optional numbers,
// which servers reject instead of treating as "unset".
func ruleDropEmptyNumbers(p *plan, _ target) {
	for k, v := range p.patch.set {
		if v == nil {
			delete(p.patch.set, k)
		}
	}
	for _, n := range []*int{&p.req.MaxTokens, &p.req.MaxCompletionTokens, &p.req.N, &p.req.TopLogProbs} {
		if *n < 0 {
			*n = 0
		}
	}
}

// isReasoningModel reports whether a model name is an OpenAI reasoning model
// (o1, o3, o4 prefixes, gpt-5), optionally behind a "provider/" prefix.
func isReasoningModel(name string) bool {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.ToLower(name)
	for _, p := range []string{"o1", "o3", "o4", "gpt-5"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ruleReasoningMaxTokens: reasoning models take max_completion_tokens.
func ruleReasoningMaxTokens(p *plan, t target) {
	if !isReasoningModel(t.model) || p.req.MaxTokens == 0 {
		return
	}
	if p.req.MaxCompletionTokens == 0 {
		p.req.MaxCompletionTokens = p.req.MaxTokens
	}
	p.req.MaxTokens = 0
}

// ruleReasoningSampling: reasoning models reject sampling parameters.
func ruleReasoningSampling(p *plan, t target) {
	if !isReasoningModel(t.model) {
		return
	}
	p.req.Temperature, p.req.TopP = 0, 0
	p.req.PresencePenalty, p.req.FrequencyPenalty = 0, 0
	p.req.LogProbs, p.req.TopLogProbs = false, 0
	p.temperature, p.topP = nil, nil
}

// ruleStructuredOutput drops response_format only when known unsupported.
func ruleStructuredOutput(p *plan, t target) {
	if t.caps.StructuredOutput == Unsupported {
		p.req.ResponseFormat = nil
	}
}

// ruleReasoningEffort drops reasoning_effort only when known unsupported.
func ruleReasoningEffort(p *plan, t target) {
	if t.caps.ReasoningEffort == Unsupported {
		p.req.ReasoningEffort = ""
	}
}

// ruleTools drops tools only when known unsupported.
func ruleTools(p *plan, t target) {
	if t.caps.Tools == Unsupported {
		p.req.Tools, p.req.ToolChoice, p.req.ParallelToolCalls = nil, nil, nil
	}
}

// imageOmitted replaces image parts for models known not to accept images.
const imageOmitted = "[image omitted: this model does not accept images]"

// ruleImages downgrades image parts to text only when multimodal input is
// known unsupported. Messages left with text only become plain strings.
func ruleImages(p *plan, t target) {
	if t.caps.Multimodal != Unsupported {
		return
	}
	for i, m := range p.req.Messages {
		if len(m.MultiContent) == 0 {
			continue
		}
		texts := make([]string, 0, len(m.MultiContent))
		for _, part := range m.MultiContent {
			if part.Type == openai.ChatMessagePartTypeImageURL || part.ImageURL != nil {
				texts = append(texts, imageOmitted)
				continue
			}
			texts = append(texts, part.Text)
		}
		m.MultiContent, m.Content = nil, strings.Join(texts, "\n")
		p.req.Messages[i] = m
	}
}

// isDeepSeekOfficial reports whether baseURL is DeepSeek's own API host.
func isDeepSeekOfficial(baseURL string) bool {
	u, err := url.Parse(baseURL)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "api.deepseek.com" || strings.HasSuffix(h, ".deepseek.com")
}

// deepSeekThinking reports whether a request runs DeepSeek's thinking mode.
func deepSeekThinking(p *plan, t target) bool {
	if strings.Contains(strings.ToLower(t.model), "reasoner") {
		return true
	}
	th, ok := p.patch.set["thinking"].(map[string]any)
	return ok && th["type"] == "enabled"
}

// ruleDeepSeek: on DeepSeek's host, thinking mode rejects tool_choice, and
// assistant tool-call messages must carry reasoning_content.
func ruleDeepSeek(p *plan, t target) {
	if !isDeepSeekOfficial(t.baseURL) {
		return
	}
	if deepSeekThinking(p, t) {
		p.req.ToolChoice = nil
		delete(p.patch.set, "tool_choice")
	}
	p.patch.fillReasoningContent = true
}
