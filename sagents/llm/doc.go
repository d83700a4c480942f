// Package llm is the model layer of sagents: a dual client (a "standard" and an
// optional "fast" model) over github.com/sashabaranov/go-openai that talks to any
// OpenAI-compatible server (OpenAI, vLLM, Ollama, DeepSeek, llama.cpp server).
//
// Its API: [New] with [Config] ([ModelConfig], [ResponseLimits],
// [PromptCacheMode]) returns a [*Client]; a [Request] ([NewRequest], the
// message constructors, the [Stable], [SemiStable] and [Volatile] marks)
// goes in and a [Response], or a [Stream] of [Chunk]s, comes out, with its
// [Usage]; failures are an [*Error] of a [Kind] matching the Err* sentinels,
// [PartialStreamError] or [EmbedBatchError]; [Capabilities] and the probes
// ([Probe], [Client.ProbeModel], [RunProbeCommand]). Provider detection,
// the request rules and the wire format are internal.
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
// fragments without indexes are handled. Non-streaming bodies are decoded by
// the same code, so a message means what a streamed delta means.
//
// Providers' dialects are normalised (wire.go): "content" as an array of
// typed parts (Mistral's thinking and text parts); reasoning in
// "reasoning_content", "reasoning" (a mirrored value counted once) or only in
// "reasoning_details"; in-band errors as "event: error" with an {"error": ...}
// envelope (Groq, with its status_code), as llama.cpp's non-standard "error:"
// field, or on a chunk that also carries choices and usage (OpenRouter, whose
// usage is kept). An in-band error nothing recognises is KindUnknown and is
// not retried. Tool calls keep their other fields in [ToolCall].Extra
// (Gemini's extra_content with its thought signature) and the client sends
// them back with the call on later turns.
//
// What one response may hold is bounded ([ResponseLimits]: text, choices and
// tool calls; 16 MiB of text by default) and passing a bound is an error
// matching [ErrResponseTooLarge].
//
// Prompt caching ([PromptCacheMode], Config.PromptCache or SAGE_PROMPT_CACHE:
// auto, breakpoints, key, off). Where the model's [Capabilities] say it takes
// cache_control (a table fills them: Claude models anywhere, Qwen on
// DashScope, anthropic/* and google/gemini* through OpenRouter), the
// transport puts up to [MaxCacheBreakpoints] {"type":"ephemeral"} markers on
// the last content part of chosen messages, turning string content into a
// text part: the end of each run of [Stable] messages, the latest non-tool
// message, then the end of each [SemiStable] run; without marks, the longest
// system message, the longest user message and the latest non-tool message.
// Tool messages, Volatile ones and segments shorter than
// [MinCachedSystemChars] / [MinCachedUserChars] get none. Where the model
// takes prompt_cache_key (OpenAI), a hash of Request.CacheKey (a session id)
// or of the stable prefix is sent instead, and nothing is marked. Unknown
// servers get neither. A 400 that names either field turns it off for the
// model and the call is retried once without it. [Usage] carries cached and
// cache-creation input tokens from every provider's usage shape.
//
// [Probe] learns a model's capabilities at start-up and caches them on disk under
// SAGE_HOME; [Config].ProbeCache makes [New] start from a fresh cached answer;
// [RunProbeCommand] is what `sage probe` calls.
package llm
