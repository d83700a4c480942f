package otelsage

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sage-go/sage/sagents/observability"
)

// ---- llm ----

// llmState is what the end of a model call needs for its metrics and
// events.
type llmState struct {
	op       string
	provider string
	model    string
	server   string
	port     int
	agent    *agentTotals
	inputs   []observability.Message // for the details event, when content goes on events
	attrs    []attribute.KeyValue    // the span's start attributes, for the events
}

// openAI reports whether the call's telemetry takes the openai.*
// attributes: the conventions put them on calls whose provider is OpenAI's
// (OpenAI itself and Azure OpenAI), not on other providers' compatible
// endpoints.
func (st *llmState) openAI() bool { return st.provider == "openai" || st.provider == "azure.ai.openai" }

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
	ls := &llmState{op: op, provider: provider, model: r.Model, server: r.ServerAddress, port: r.ServerPort,
		agent: nearestAgent(ctx)}
	if h.capture.Events() {
		ls.inputs = r.Messages
	}
	attrs := make([]attribute.KeyValue, 0, 20)
	attrs = append(attrs,
		AttrOperationName.String(op),
		AttrProviderName.String(provider),
		AttrRequestModel.String(r.Model),
	)
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
	if ls.openAI() {
		if r.APIType != "" {
			attrs = append(attrs, AttrAPIType.String(r.APIType))
		}
		if r.Params.ServiceTier != "" {
			attrs = append(attrs, AttrRequestServiceTier.String(r.Params.ServiceTier))
		}
	}
	ls.attrs = attrs
	if r.ModelType != "" {
		attrs = append(attrs, AttrModelType.String(string(r.ModelType)))
	}
	if r.Step != "" {
		attrs = append(attrs, AttrStepName.String(r.Step))
	}
	if a, ok := h.messagesAttr(AttrInputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	if a := ls.agent; a != nil && op == OpChat {
		a.mu.Lock()
		if a.model == "" { // the agent's model is that of its first chat, unless it named one
			a.provider, a.model = provider, r.Model
		}
		if a.provider == "" {
			a.provider = provider
		}
		a.inferenceCalls++
		a.mu.Unlock()
	}
	return h.begin(ctx, r.Model, trace.SpanKindClient, &spanState{op: op, llm: ls}, attrs...), nil
}

// metricAttrs are the attributes of a model call's metrics.
func (st *llmState) metricAttrs(r observability.LLMResponse, errType string) attribute.Set {
	kv := make([]attribute.KeyValue, 0, 9)
	kv = append(kv, AttrOperationName.String(st.op), AttrProviderName.String(st.provider),
		AttrRequestModel.String(st.model))
	if r.Model != "" {
		kv = append(kv, AttrResponseModel.String(r.Model))
	}
	if st.server != "" {
		kv = append(kv, AttrServerAddress.String(st.server))
	}
	if st.port != 0 {
		kv = append(kv, AttrServerPort.Int(st.port))
	}
	if st.openAI() && r.ServiceTier != "" {
		kv = append(kv, AttrServiceTier.String(r.ServiceTier))
	}
	if errType != "" {
		kv = append(kv, AttrErrorType.String(errType))
	}
	return attribute.NewSet(kv...)
}

// responseAttrs are the attributes a model call's response adds to its
// span (and to its details event).
func (h *Handler) responseAttrs(st *llmState, r observability.LLMResponse, known bool) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
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
	embeddings := st != nil && st.op == OpEmbeddings
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
		attrs = append(attrs, cacheWriteKey(h.latest).Int64(u.CacheCreationInputTokens))
	}
	if u.ReasoningTokens != 0 {
		attrs = append(attrs, AttrUsageReasoning.Int64(u.ReasoningTokens))
	}
	if r.TimeToFirstChunk > 0 {
		attrs = append(attrs, AttrTimeToFirstChunk.Float64(r.TimeToFirstChunk.Seconds()))
	}
	if st != nil && st.openAI() {
		if r.SystemFingerprint != "" {
			attrs = append(attrs, AttrSystemFingerprint.String(r.SystemFingerprint))
		}
		if r.ServiceTier != "" {
			attrs = append(attrs, AttrServiceTier.String(r.ServiceTier))
		}
	}
	return attrs
}

// LLMEnd ends the model-call span with the response model, finish reasons,
// token usage and time to first chunk, records the metrics and, when
// content goes on events, the details event. A usage whose input and
// output counts are both zero is unknown and not reported.
func (h *Handler) LLMEnd(ctx context.Context, r observability.LLMResponse) error {
	u := r.Usage
	known := u.InputTokens != 0 || u.OutputTokens != 0
	st := stateOf(ctx)
	var ls *llmState
	if st != nil {
		ls = st.llm
	}
	attrs := h.responseAttrs(ls, r, known)
	if a, ok := h.messagesAttr(AttrOutputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	h.end(ctx, attrs...)
	if ls == nil {
		return nil
	}
	embeddings := ls.op == OpEmbeddings
	if a := ls.agent; a != nil && !embeddings {
		a.mu.Lock()
		if r.Model != "" && a.answer == "" {
			a.answer = r.Model
		}
		if len(r.FinishReasons) > 0 {
			a.finish = append(a.finish[:0], r.FinishReasons...)
		}
		if known {
			a.usage = true
			a.input += u.InputTokens
			a.output += u.OutputTokens
		}
		a.cacheRead += u.CacheReadInputTokens
		a.cacheWrite += u.CacheCreationInputTokens
		a.mu.Unlock()
	}
	h.m.inference(ctx, ls.metricAttrs(r, ""), embeddings, time.Since(st.start), r, "", known)
	h.details(ctx, ls, &r, known, "")
	return nil
}

// LLMError ends the model-call span with an error, records its duration
// and emits the gen_ai.client.operation.exception event.
func (h *Handler) LLMError(ctx context.Context, err error) error {
	st := stateOf(ctx)
	var attrs []attribute.KeyValue
	if h.latest && st != nil && st.llm != nil && st.llm.op == OpChat {
		// A finish reason was expected and not received.
		attrs = append(attrs, AttrResponseFinish.StringSlice([]string{"error"}))
	}
	h.fail(ctx, err, attrs...)
	if st == nil || st.llm == nil {
		return nil
	}
	et := observability.ErrorType(err)
	h.m.inference(ctx, st.llm.metricAttrs(observability.LLMResponse{}, et), st.llm.op == OpEmbeddings,
		time.Since(st.start), observability.LLMResponse{}, et, false)
	h.exception(ctx, st.llm, err, et)
	h.details(ctx, st.llm, nil, false, et)
	return nil
}
