package otelsage

// The external tests' names for the attribute keys, metric and event
// names, protocols and environment readers the package keeps unexported.
const (
	AttrOperationName           = attrOperationName
	AttrTokenModality           = attrTokenModality
	AttrTokenType               = attrTokenType
	AttrWorkflowName            = attrWorkflowName
	EventOperationDetails       = eventOperationDetails
	EventOperationException     = eventOperationException
	MetricEmbeddingsDuration    = metricEmbeddingsDuration
	MetricEmbeddingsInput       = metricEmbeddingsInput
	MetricExecuteToolDuration   = metricExecuteToolDuration
	MetricInferenceDuration     = metricInferenceDuration
	MetricInferenceTPOC         = metricInferenceTPOC
	MetricInferenceTTFC         = metricInferenceTTFC
	MetricInvokeAgentDuration   = metricInvokeAgentDuration
	MetricInvokeAgentInference  = metricInvokeAgentInference
	MetricInvokeAgentToolCalls  = metricInvokeAgentToolCalls
	MetricOperationDuration     = metricOperationDuration
	MetricOperationInputTokens  = metricOperationInputTokens
	MetricOperationOutputTokens = metricOperationOutputTokens
	MetricPromptCacheHitRatio   = metricPromptCacheHitRatio
	MetricTimePerOutputChunk    = metricTimePerOutputChunk
	MetricTimeToFirstChunk      = metricTimeToFirstChunk
	MetricTokenUsage            = metricTokenUsage
	MetricUsageCacheReadTokens  = metricUsageCacheReadTokens
	MetricUsageCacheWriteTokens = metricUsageCacheWriteTokens
	MetricUsageInputTokens      = metricUsageInputTokens
	MetricUsageOutputTokens     = metricUsageOutputTokens
	MetricUsageReasoningTokens  = metricUsageReasoningTokens
	MetricWorkflowDuration      = metricWorkflowDuration
	ProtocolGRPC                = protocolGRPC
	ProtocolHTTP                = protocolHTTP
	ScopeName                   = scopeName
)

var (
	CaptureContentFromEnv     = captureContentFromEnv
	LatestExperimentalFromEnv = latestExperimentalFromEnv
)
