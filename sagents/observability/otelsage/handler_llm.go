package otelsage

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// ---- llm ----

// llmState is what the end of a model call needs for its metrics.
type llmState struct {
	op       string
	provider string
	model    string
	server   string
	port     int
	agent    *agentTotals
}

func paramAttrs(p observability.RequestParams) []attribute.KeyValue {
	var kv []attribute.KeyValue
	if p.Temperature != nil {
		kv = append(kv, AttrRequestTemperature.Float64(*p.Temperature))
	}
	if p.TopP != nil {
		kv = append(kv, AttrRequestTopP.Float64(*p.TopP))
	}
	if p.MaxTokens > 0 {
		kv = append(kv, AttrRequestMaxTokens.Int(p.MaxTokens))
	}
	if len(p.Stop) > 0 {
		kv = append(kv, AttrRequestStop.StringSlice(p.Stop))
	}
	if p.Seed != nil {
		kv = append(kv, AttrRequestSeed.Int64(*p.Seed))
	}
	if p.FrequencyPenalty != nil {
		kv = append(kv, AttrRequestFreqPenalty.Float64(*p.FrequencyPenalty))
	}
	if p.PresencePenalty != nil {
		kv = append(kv, AttrRequestPresPenalty.Float64(*p.PresencePenalty))
	}
	if p.ChoiceCount > 1 {
		kv = append(kv, AttrRequestChoiceCount.Int(p.ChoiceCount))
	}
	if p.OutputType != "" {
		kv = append(kv, AttrOutputType.String(p.OutputType))
	}
	if p.Dimensions > 0 {
		kv = append(kv, AttrEmbeddingsDims.Int(p.Dimensions))
	}
	return kv
}

// LLMStart starts a CLIENT "chat {model}" (or "embeddings {model}") span.
func (h *Handler) LLMStart(ctx context.Context, r observability.LLMRequest) (context.Context, error) {
	provider := r.Provider
	if provider == "" {
		provider = h.provider
	}
	op := r.Operation
	if op == "" {
		op = OpChat
	}
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs,
		AttrOperationName.String(op),
		AttrProviderName.String(provider),
		AttrRequestModel.String(r.Model),
	)
	if r.ModelType != "" {
		attrs = append(attrs, AttrModelType.String(string(r.ModelType)))
	}
	if r.Step != "" {
		attrs = append(attrs, AttrStepName.String(r.Step))
	}
	if r.ServerAddress != "" {
		attrs = append(attrs, AttrServerAddress.String(r.ServerAddress))
	}
	if r.ServerPort != 0 {
		attrs = append(attrs, AttrServerPort.Int(r.ServerPort))
	}
	if r.Stream {
		attrs = append(attrs, AttrRequestStream.Bool(true))
	}
	attrs = append(attrs, paramAttrs(r.Params)...)
	if a, ok := h.messagesAttr(AttrInputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	ls := &llmState{op: op, provider: provider, model: r.Model, server: r.ServerAddress, port: r.ServerPort, agent: nearestAgent(ctx)}
	if a := ls.agent; a != nil && op == OpChat { // the agent's model is that of its first chat
		a.mu.Lock()
		if a.model == "" {
			a.provider, a.model = provider, r.Model
		}
		a.mu.Unlock()
	}
	return h.begin(ctx, op, r.Model, trace.SpanKindClient, &spanState{llm: ls}, attrs...), nil
}

func (st *llmState) metricAttrs(responseModel, errType string) attribute.Set {
	kv := make([]attribute.KeyValue, 0, 7)
	kv = append(kv, AttrOperationName.String(st.op), AttrProviderName.String(st.provider),
		AttrRequestModel.String(st.model))
	if responseModel != "" {
		kv = append(kv, AttrResponseModel.String(responseModel))
	}
	if st.server != "" {
		kv = append(kv, AttrServerAddress.String(st.server))
	}
	if st.port != 0 {
		kv = append(kv, AttrServerPort.Int(st.port))
	}
	if errType != "" {
		kv = append(kv, AttrErrorType.String(errType))
	}
	return attribute.NewSet(kv...)
}

// LLMEnd ends the model-call span with the response model, finish reasons,
// token usage and time to first chunk, and records the metrics. A usage
// whose input and output counts are both zero is unknown and not reported.
func (h *Handler) LLMEnd(ctx context.Context, r observability.LLMResponse) error {
	attrs := make([]attribute.KeyValue, 0, 11)
	if r.Model != "" {
		attrs = append(attrs, AttrResponseModel.String(r.Model))
	}
	if r.ID != "" {
		attrs = append(attrs, AttrResponseID.String(r.ID))
	}
	if len(r.FinishReasons) > 0 {
		attrs = append(attrs, AttrResponseFinish.StringSlice(r.FinishReasons))
	}
	u := r.Usage
	known := u.InputTokens != 0 || u.OutputTokens != 0
	st := stateOf(ctx)
	embeddings := st != nil && st.llm != nil && st.llm.op == OpEmbeddings
	switch {
	case known && embeddings: // embeddings produce no output tokens
		attrs = append(attrs, AttrUsageInput.Int64(u.InputTokens))
	case known:
		attrs = append(attrs, AttrUsageInput.Int64(u.InputTokens), AttrUsageOutput.Int64(u.OutputTokens))
	}
	if u.CacheReadInputTokens != 0 {
		attrs = append(attrs, AttrUsageCacheRead.Int64(u.CacheReadInputTokens))
	}
	if u.CacheCreationInputTokens != 0 {
		attrs = append(attrs, AttrUsageCacheCreation.Int64(u.CacheCreationInputTokens))
	}
	if u.ReasoningTokens != 0 {
		attrs = append(attrs, AttrUsageReasoning.Int64(u.ReasoningTokens))
	}
	if r.TimeToFirstChunk > 0 {
		attrs = append(attrs, AttrTimeToFirstChunk.Float64(r.TimeToFirstChunk.Seconds()))
	}
	if a, ok := h.messagesAttr(AttrOutputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	h.end(ctx, attrs...)
	if st == nil || st.llm == nil {
		return nil
	}
	ls := st.llm
	if a := ls.agent; a != nil && !embeddings {
		a.mu.Lock()
		if r.Model != "" && a.answer == "" {
			a.answer = r.Model
		}
		if known {
			a.usage = true
			a.input += u.InputTokens
			a.output += u.OutputTokens
		}
		a.mu.Unlock()
	}
	set := ls.metricAttrs(r.Model, "")
	h.duration.Record(ctx, time.Since(st.start).Seconds(), metric.WithAttributeSet(set))
	if r.TimeToFirstChunk > 0 {
		h.ttfc.Record(ctx, r.TimeToFirstChunk.Seconds(), metric.WithAttributeSet(set))
	}
	h.tokens.record(ctx, set, u, known, embeddings)
	if known {
		if u.InputTokens > 0 && !embeddings {
			ratio := min(1, float64(u.CacheReadInputTokens)/float64(u.InputTokens))
			h.cacheHit.Record(ctx, ratio, metric.WithAttributeSet(set))
		}
	}
	return nil
}

// LLMError ends the model-call span with an error and records its duration.
func (h *Handler) LLMError(ctx context.Context, err error) error {
	st := h.fail(ctx, err)
	if st != nil && st.llm != nil {
		set := st.llm.metricAttrs("", observability.ErrorType(err))
		h.duration.Record(ctx, time.Since(st.start).Seconds(), metric.WithAttributeSet(set))
		h.tokens.record(ctx, set, observability.Usage{}, false, st.llm.op == OpEmbeddings)
	}
	return nil
}
