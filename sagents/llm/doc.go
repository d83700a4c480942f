// Package llm is the model layer of sagents: a dual client (a "standard" and an
// optional "fast" model) over github.com/sashabaranov/go-openai that talks to any
// OpenAI-compatible server (OpenAI, vLLM, Ollama, DeepSeek, llama.cpp server).
//
// Agent code builds a [Request] (a go-openai ChatCompletionRequest plus a few
// fields go-openai cannot express) and calls [Client.Chat] or [Client.ChatStream].
// The client
//
//   - picks the model and rotates its API keys round-robin,
//   - sanitises the request by the model's tri-state [Capabilities]
//     (Unknown never strips anything; only a known Unsupported does),
//   - rewrites the JSON body once, in its HTTP transport, to send explicit zero
//     values (temperature: 0) and extra body fields that go-openai lacks,
//   - retries connection errors, 408, 409, 429 and 5xx with exponential backoff
//     and jitter, honouring Retry-After,
//   - classifies failures as typed [*Error] values (match them with errors.Is
//     against [ErrContextWindowExceeded], [ErrRateLimited], [ErrAuth],
//     [ErrBadRequest], [ErrUnsupportedParameter], or errors.As),
//   - and retries once without a parameter the server says it does not support.
//
// Streaming does not use go-openai's stream reader: go-openai still builds and
// sends the request and decodes error responses, but the SSE body is parsed by
// this package (see [Stream]) so that keep-alive comments, usage chunks with
// empty choices, in-band {"error": ...} events, "reasoning" deltas and tool-call
// fragments without indexes are handled.
//
// [Probe] learns a model's capabilities at start-up and caches them on disk under
// SAGE_HOME; [RunProbeCommand] is what `sage probe` calls.
package llm
