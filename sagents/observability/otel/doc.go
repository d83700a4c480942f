// Package otel is the OpenTelemetry handler of package observability, and
// the process-wide set-up that goes with it.
//
// [NewHandler] turns observability events into spans and metrics that follow
// the OpenTelemetry GenAI semantic conventions:
//
//	chain  -> "invoke_workflow {name}"  INTERNAL  gen_ai.operation.name=invoke_workflow
//	agent  -> "invoke_agent {agent}"    INTERNAL  gen_ai.operation.name=invoke_agent, gen_ai.agent.name
//	llm    -> "chat {model}"            CLIENT    gen_ai.operation.name=chat, gen_ai.provider.name,
//	                                              gen_ai.request.model, gen_ai.response.model,
//	                                              gen_ai.response.finish_reasons, gen_ai.usage.*,
//	                                              gen_ai.response.time_to_first_chunk, server.address
//	tool   -> "execute_tool {tool}"     INTERNAL  gen_ai.operation.name=execute_tool, gen_ai.tool.name,
//	                                              gen_ai.tool.call.id
//	message -> a "gen_ai.message" span event on the enclosing span
//
// Every span carries gen_ai.conversation.id (the session id). Errors are
// recorded with RecordError, an Error status and a low-cardinality
// error.type. Message content, tool arguments and tool results are exported
// only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true or
// [WithCaptureContent] says so, truncated to [WithMaxContentLength] bytes.
//
// Model calls also feed the gen_ai.client.operation.duration and
// gen_ai.client.token.usage histograms through the OTel metric API.
//
// Because a start event puts its span in the returned context, code running
// under a tool call (sandbox exec, file operations) that starts spans from
// that context with any OTel tracer appears as children of the tool span.
//
// [Setup] builds a TracerProvider from the standard OTEL_* environment
// variables with an OTLP gRPC exporter and a batch processor, optionally a
// Prometheus /metrics endpoint, and registers the handler with a Manager.
// An unreachable collector never blocks or fails the application.
package otel
