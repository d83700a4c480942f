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
		kv = append(kv, attrRequestTemperature.Float64(*p.Temperature))
	}
	if p.TopP != nil {
		kv = append(kv, attrRequestTopP.Float64(*p.TopP))
	}
	if p.MaxTokens > 0 {
		kv = append(kv, attrRequestMaxTokens.Int(p.MaxTokens))
	}
	if len(p.Stop) > 0 {
		kv = append(kv, attrRequestStop.StringSlice(p.Stop))
	}
	if p.Seed != nil {
		kv = append(kv, attrRequestSeed.Int64(*p.Seed))
	}
	if p.FrequencyPenalty != nil {
		kv = append(kv, attrRequestFreqPenalty.Float64(*p.FrequencyPenalty))
	}
	if p.PresencePenalty != nil {
		kv = append(kv, attrRequestPresPenalty.Float64(*p.PresencePenalty))
	}
	if p.ChoiceCount > 1 {
		kv = append(kv, attrRequestChoiceCount.Int(p.ChoiceCount))
	}
	if p.OutputType != "" {
		kv = append(kv, attrOutputType.String(p.OutputType))
	}
	if p.Dimensions > 0 {
		kv = append(kv, attrEmbeddingsDims.Int(p.Dimensions))
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
		op = opChat
	}
	ls := &llmState{op: op, provider: provider, model: r.Model, server: r.ServerAddress, port: r.ServerPort,
		agent: nearestAgent(ctx)}
	if h.capture.Events() {
		ls.inputs = r.Messages
	}
	attrs := make([]attribute.KeyValue, 0, 20)
	attrs = append(attrs,
		attrOperationName.String(op),
		attrProviderName.String(provider),
		attrRequestModel.String(r.Model),
	)
	if r.ServerAddress != "" {
		attrs = append(attrs, attrServerAddress.String(r.ServerAddress))
	}
	if r.ServerPort != 0 {
		attrs = append(attrs, attrServerPort.Int(r.ServerPort))
	}
	if r.Stream {
		attrs = append(attrs, attrRequestStream.Bool(true))
	}
	attrs = append(attrs, paramAttrs(r.Params)...)
	if ls.openAI() {
		if r.APIType != "" {
			attrs = append(attrs, attrAPIType.String(r.APIType))
		}
		if r.Params.ServiceTier != "" {
			attrs = append(attrs, attrRequestServiceTier.String(r.Params.ServiceTier))
		}
	}
	ls.attrs = attrs
	if r.ModelType != "" {
		attrs = append(attrs, attrModelType.String(string(r.ModelType)))
	}
	if r.Step != "" {
		attrs = append(attrs, attrStepName.String(r.Step))
	}
	if a, ok := h.messagesAttr(attrInputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	if a := ls.agent; a != nil && op == opChat {
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
	kv = append(kv, attrOperationName.String(st.op), attrProviderName.String(st.provider),
		attrRequestModel.String(st.model))
	if r.Model != "" {
		kv = append(kv, attrResponseModel.String(r.Model))
	}
	if st.server != "" {
		kv = append(kv, attrServerAddress.String(st.server))
	}
	if st.port != 0 {
		kv = append(kv, attrServerPort.Int(st.port))
	}
	if st.openAI() && r.ServiceTier != "" {
		kv = append(kv, attrServiceTier.String(r.ServiceTier))
	}
	if errType != "" {
		kv = append(kv, attrErrorType.String(errType))
	}
	return attribute.NewSet(kv...)
}

// responseAttrs are the attributes a model call's response adds to its
// span (and to its details event).
func (h *Handler) responseAttrs(st *llmState, r observability.LLMResponse, known bool) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	if r.Model != "" {
		attrs = append(attrs, attrResponseModel.String(r.Model))
	}
	if r.ID != "" {
		attrs = append(attrs, attrResponseID.String(r.ID))
	}
	if len(r.FinishReasons) > 0 {
		attrs = append(attrs, attrResponseFinish.StringSlice(r.FinishReasons))
	}
	u := r.Usage
	embeddings := st != nil && st.op == opEmbeddings
	switch {
	case known && embeddings: // embeddings produce no output tokens
		attrs = append(attrs, attrUsageInput.Int64(u.InputTokens))
	case known:
		attrs = append(attrs, attrUsageInput.Int64(u.InputTokens), attrUsageOutput.Int64(u.OutputTokens))
	}
	if u.CacheReadInputTokens != 0 {
		attrs = append(attrs, attrUsageCacheRead.Int64(u.CacheReadInputTokens))
	}
	if u.CacheCreationInputTokens != 0 {
		attrs = append(attrs, cacheWriteKey(h.latest).Int64(u.CacheCreationInputTokens))
	}
	if u.ReasoningTokens != 0 {
		attrs = append(attrs, attrUsageReasoning.Int64(u.ReasoningTokens))
	}
	if r.TimeToFirstChunk > 0 {
		attrs = append(attrs, attrTimeToFirstChunk.Float64(r.TimeToFirstChunk.Seconds()))
	}
	if st != nil && st.openAI() {
		if r.SystemFingerprint != "" {
			attrs = append(attrs, attrSystemFingerprint.String(r.SystemFingerprint))
		}
		if r.ServiceTier != "" {
			attrs = append(attrs, attrServiceTier.String(r.ServiceTier))
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
	if a, ok := h.messagesAttr(attrOutputMessages, r.Messages); ok {
		attrs = append(attrs, a)
	}
	h.end(ctx, attrs...)
	if ls == nil {
		return nil
	}
	embeddings := ls.op == opEmbeddings
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
	if h.latest && st != nil && st.llm != nil && st.llm.op == opChat {
		// A finish reason was expected and not received.
		attrs = append(attrs, attrResponseFinish.StringSlice([]string{"error"}))
	}
	h.fail(ctx, err, attrs...)
	if st == nil || st.llm == nil {
		return nil
	}
	et := observability.ErrorType(err)
	h.m.inference(ctx, st.llm.metricAttrs(observability.LLMResponse{}, et), st.llm.op == opEmbeddings,
		time.Since(st.start), observability.LLMResponse{}, et, false)
	h.exception(ctx, st.llm, err, et)
	h.details(ctx, st.llm, nil, false, et)
	return nil
}
