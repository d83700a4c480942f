// Package otelsage is the OpenTelemetry handler of package observability (named
// like otelhttp, so it does not clash with go.opentelemetry.io/otel), and
// the process-wide set-up that goes with it.
//
// [NewHandler] turns observability events into spans and metrics that follow
// the OpenTelemetry GenAI semantic conventions v1.41 (schema URL
// [SchemaURL]):
//
//	chain  -> "invoke_workflow {name}"  INTERNAL  gen_ai.operation.name=invoke_workflow, gen_ai.workflow.name
//	                                              (none when the chain only wraps an agent of its name)
//	agent  -> "invoke_agent {agent}"    INTERNAL  gen_ai.operation.name=invoke_agent, gen_ai.agent.name,
//	                                              gen_ai.provider.name, gen_ai.request.model,
//	                                              gen_ai.response.model, gen_ai.usage.* (totals of its calls)
//	llm    -> "chat {model}"            CLIENT    gen_ai.operation.name=chat, gen_ai.provider.name,
//	                                              gen_ai.request.model and the parameters that were set
//	                                              (temperature, top_p, max_tokens, stop_sequences, seed,
//	                                              frequency/presence_penalty, choice.count, gen_ai.output.type),
//	                                              gen_ai.response.model, gen_ai.response.finish_reasons,
//	                                              gen_ai.usage.*, gen_ai.response.time_to_first_chunk,
//	                                              server.address, server.port
//	llm (embeddings) -> "embeddings {model}"  CLIENT  gen_ai.operation.name=embeddings,
//	                                              gen_ai.embeddings.dimension.count, gen_ai.usage.input_tokens
//	tool   -> "execute_tool {tool}"     INTERNAL  gen_ai.operation.name=execute_tool, gen_ai.tool.name,
//	                                              gen_ai.tool.description, gen_ai.tool.call.id
//	message -> nothing (no convention defines a per-message event)
//
// Every span carries gen_ai.conversation.id (the session id). A failure sets
// an Error status and a low-cardinality error.type ([observability.ErrorType]:
// rate_limited, timeout, connection, context_window_exceeded, ...) on every
// span it fails; the exception event is recorded once, on the span where the
// error happened, not again on the agent and workflow it travels through.
// Token counts are reported only when the server sent them.
//
// Message content, tool arguments and tool results are exported only when
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true, SPAN_ONLY or
// SPAN_AND_EVENT, or [WithCaptureContent] says so, truncated to
// [WithMaxContentLength] bytes. gen_ai.input.messages and
// gen_ai.output.messages follow the conventions' message schema: text,
// tool_call (id, name, arguments) and tool_call_response (id, response)
// parts, and a finish_reason on output messages.
//
// Metrics (histograms, the conventions' buckets):
//
//	gen_ai.client.operation.duration            s        every operation, by gen_ai.operation.name
//	                                                     (chat, execute_tool, invoke_agent, invoke_workflow)
//	gen_ai.client.token.usage                   {token}  chat, by gen_ai.token.type
//	gen_ai.client.operation.time_to_first_chunk s        streamed chat calls
//	sage.llm.prompt_cache.hit_ratio             1        chat calls with input: share read from the cache
//
// OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental ([SemconvOptInEnv],
// or [HandlerOptions].LatestExperimental) switches the token metrics to the latest
// development conventions instead of the release's: counters
// gen_ai.client.inference.usage.{input,output,cache_read.input,
// cache_write.input,reasoning.output}_tokens with gen_ai.token.modality
// (every finished call, 0 when no usage came) and the per-operation
// histograms gen_ai.client.inference.operation.{input,output}_tokens
// (calls with known usage); gen_ai.client.token.usage is then not recorded.
//
// Because a start event puts its span in the returned context, code running
// under a tool call (sandbox exec, file operations) that starts spans from
// that context with any OTel tracer appears as children of the tool span.
//
// [Setup] builds the providers from the standard OTEL_* environment
// variables: OTLP traces and metrics over gRPC or HTTP/protobuf
// (OTEL_EXPORTER_OTLP_PROTOCOL and the per-signal _TRACES_/_METRICS_
// variants of PROTOCOL, ENDPOINT, INSECURE; headers, compression,
// certificates and the metric temporality are read by the exporters),
// OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER (otlp, prometheus, none), an
// optional Prometheus /metrics endpoint, and registers the handler with a
// Manager. An unreachable collector never blocks or fails the application.
// The default protocol is gRPC (localhost:4317); Langfuse and Datadog's
// agentless intake want OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf.
package otelsage
