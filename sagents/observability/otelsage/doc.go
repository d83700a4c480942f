// Package otelsage is the OpenTelemetry handler of package observability (named
// like otelhttp, so it does not clash with go.opentelemetry.io/otel), and
// the process-wide set-up that goes with it.
//
// Its API: [Setup] and [SetupOptions] (the providers from the OTEL_*
// environment, with the handler registered with a Manager), or
// [NewHandler] and [HandlerOptions] over providers of one's own, with its
// [CaptureMode]; [ExportConfiguredFromEnv]; the variables and values that
// choose the conventions and the content capture ([SemconvOptInEnv],
// [LatestExperimental], [CaptureContentEnv]), the schema URLs and the
// defaults. The attribute keys and the metric and event names are the
// conventions' own, listed below, and unexported.
//
// # Conventions
//
// [NewHandler] turns observability events into spans, metrics and log events
// that follow the OpenTelemetry GenAI semantic conventions of release v1.41
// (schema URL [SchemaURL]) by default. With
// OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental ([SemconvOptInEnv],
// or [HandlerOptions].LatestExperimental) it follows the latest development
// conventions instead (open-telemetry/semantic-conventions-genai, whose
// documents build on semantic conventions v1.44.0: schema URL
// [LatestSchemaURL]), and none of the release's instruments.
//
// Spans (both versions):
//
//	chain  -> "invoke_workflow {name}"  INTERNAL  only when the chain groups GenAI operations (two
//	                                              agents, model calls or tools directly under it):
//	                                              gen_ai.operation.name=invoke_workflow, gen_ai.workflow.name;
//	                                              a chain that only wraps an agent of its name is that agent;
//	                                              any other chain (one agent plus sandbox work, as sage
//	                                              agent; sandbox work only, as sage exec) is a plain span
//	                                              named after the chain, with sage.session.id and no GenAI
//	                                              name, attribute or metric
//	agent  -> "invoke_agent {agent}"    INTERNAL  gen_ai.agent.name, gen_ai.request.model (the agent's, at
//	                                              creation when the event names it), gen_ai.provider.name
//	                                              (release only), gen_ai.response.model, the last call's
//	                                              gen_ai.response.finish_reasons, gen_ai.usage.* totals
//	                                              (cache reads and writes included)
//	llm    -> "chat {model}"            CLIENT    gen_ai.provider.name (the base URL's well-known provider),
//	                                              gen_ai.request.model and the parameters that were set,
//	                                              gen_ai.response.model, .id, .finish_reasons ("error" for a
//	                                              failed call under the opt-in), gen_ai.usage.* (cache writes
//	                                              as cache_creation, or cache_write under the opt-in),
//	                                              gen_ai.response.time_to_first_chunk, server.address/port;
//	                                              for OpenAI and Azure OpenAI openai.api.type,
//	                                              openai.request.service_tier, openai.response.service_tier
//	                                              and openai.response.system_fingerprint
//	llm (embeddings) -> "embeddings {model}"  CLIENT  gen_ai.embeddings.dimension.count, input tokens
//	tool   -> "execute_tool {tool}"     INTERNAL  gen_ai.tool.name, .type, .description, .call.id (and the
//	                                              calling agent's gen_ai.agent.name under the opt-in)
//	sandbox -> "sandbox.{op}"           INTERNAL  sage.sandbox.mode, .id, .isolation, .network, .path,
//	                                              .task_id, .exit_code, .signal, .timed_out, .not_found; a
//	                                              background command (the shell tool's) is
//	                                              "sandbox.background", backdated to the command's start
//	message -> nothing (no convention defines a per-message event)
//
// Every GenAI span carries gen_ai.conversation.id (the session id). A
// failure sets an Error status and a low-cardinality error.type
// ([observability.ErrorType]) on every span it fails; the exception event
// is recorded once, on the span where the error happened. Token counts are
// reported only when the server sent them.
//
// Metrics (histograms with the conventions' buckets), release:
//
//	gen_ai.client.operation.duration              s        every GenAI operation, with gen_ai.provider.name
//	gen_ai.client.token.usage                     {token}  model calls with usage, by gen_ai.token.type
//	gen_ai.client.operation.time_to_first_chunk   s        streamed calls
//	gen_ai.client.operation.time_per_output_chunk s        streamed calls, one point per chunk after the first
//
// and under the opt-in:
//
//	gen_ai.client.inference.duration, .time_to_first_chunk, .time_per_output_chunk   chat calls
//	gen_ai.client.inference.usage.{input,output,cache_read.input,cache_write.input,
//	    reasoning.output}_tokens   counters, every finished call (0 for a failed one), by gen_ai.token.modality
//	gen_ai.client.inference.operation.{input,output}_tokens   successful calls with usage
//	gen_ai.client.embeddings.duration, gen_ai.client.embeddings.operation.input_tokens
//	gen_ai.invoke_agent.duration, .inference_calls, .tool_calls
//	gen_ai.execute_tool.duration, gen_ai.workflow.duration
//
// plus sage.llm.prompt_cache.hit_ratio (the share of input read from the
// prompt cache) in both.
//
// Log events (both versions; through [HandlerOptions].LoggerProvider or the
// global one): gen_ai.client.operation.exception (WARN) for every failed
// model call, and the opt-in gen_ai.client.inference.operation.details with
// the call's attributes and its input and output messages in structured
// form, when content goes on events.
//
// Message content, tool arguments and tool results are exported only when
// asked: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT ([CaptureContentEnv])
// true or SPAN_ONLY puts them on spans, EVENT_ONLY on the details event,
// SPAN_AND_EVENT on both ([HandlerOptions].CaptureContent and CaptureMode
// decide in code), each truncated to [HandlerOptions].MaxContentLength
// bytes. gen_ai.input.messages and gen_ai.output.messages follow the
// conventions' message schema (text, tool_call, tool_call_response parts; an
// output finish_reason of stop, length, content_filter, tool_call or error).
//
// Because a start event puts its span in the returned context, code running
// under a tool call (sandbox exec, file operations) that starts spans from
// that context with any OTel tracer appears as children of the tool span.
//
// # Setup
//
// [Setup] builds the providers from the standard OTEL_* environment
// variables: OTLP traces, metrics and logs over gRPC or HTTP/protobuf
// (OTEL_EXPORTER_OTLP_PROTOCOL and the per-signal _TRACES_/_METRICS_/_LOGS_
// variants of PROTOCOL, ENDPOINT, INSECURE, TIMEOUT; headers, compression,
// certificates and the metric temporality are read by the exporters),
// OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER and OTEL_LOGS_EXPORTER (otlp,
// console, none; prometheus for metrics), an optional Prometheus /metrics
// endpoint, and registers the handler with a Manager. A signal the
// environment gives no endpoint while it gives one to another signal (the
// traces-only set-up Langfuse and Datadog document) is not exported. An
// unreachable collector never blocks or fails the application. The
// default protocol is gRPC (localhost:4317); Langfuse and Datadog's
// agentless intake want OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf.
package otelsage
