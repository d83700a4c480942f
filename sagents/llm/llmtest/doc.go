// Package llmtest is a scripted OpenAI-compatible server for tests. It speaks
// chat completions (JSON and SSE framed exactly as the OpenAI API does:
// "data: {...}\n\n" events ending with "data: [DONE]\n\n") and embeddings,
// records every request body, and plays replies in order: errors with
// Retry-After, slow first bytes, mid-stream failures and hang-ups.
package llmtest
