package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sage-go/sage/internal/ctxsleep"
	"github.com/sage-go/sage/sagents/observability"
)

// ModelType selects which configured model a request uses.
type ModelType int

// The two model slots. Fast falls back to Standard when no fast model is set.
const (
	Standard ModelType = iota
	Fast
)

func (t ModelType) String() string {
	if t == Fast {
		return "fast"
	}
	return "standard"
}

// ModelConfig names one model on one OpenAI-compatible server.
type ModelConfig struct {
	BaseURL string // e.g. https://api.openai.com/v1 or http://localhost:8000/v1
	// APIKey may hold several comma-separated keys; requests rotate through
	// them round-robin.
	APIKey string
	Model  string
	// Provider is the model's gen_ai.provider.name in telemetry; empty
	// means the well-known provider of BaseURL's host (providerName).
	Provider string
	// Capabilities known in advance; Unknown fields are learned from probes
	// and from the server's errors.
	Capabilities Capabilities
}

// Config configures a [Client].
type Config struct {
	Standard ModelConfig
	// Fast is optional. When Fast.Model is empty, Fast requests use Standard.
	// An empty Fast.BaseURL or Fast.APIKey is taken from Standard.
	Fast ModelConfig
	// Embedding is optional and needed only by Embed; empty BaseURL and
	// APIKey are taken from Standard.
	Embedding           ModelConfig
	EmbeddingBatchSize  int // texts per embeddings request; default 64
	EmbeddingDimensions int // 0 leaves the model's default

	// HTTPClient is shared by every model (tracing, proxies). nil means a
	// client over http.DefaultTransport. The client is copied, not modified.
	HTTPClient *http.Client
	Retry      RetryPolicy
	// FirstChunkTimeout abandons (and retries) a stream attempt whose first
	// chunk has not arrived in time. 0 means no limit beyond ctx.
	FirstChunkTimeout time.Duration
	// Observer, when set, receives an llm start and an llm end or error
	// event for every Chat and ChatStream call (probes are not reported).
	// The events nest under the run carried by the call's context.
	Observer *observability.Manager
	// Limits bounds what one response may hold; zero fields take defaults.
	Limits ResponseLimits
	// ProbeCache, when set, makes New start each model (standard, fast)
	// from the capabilities a cached probe found, if one is fresh under its
	// TTL (CacheDir, TTL, Now and NoCache/Refresh apply; New still makes no
	// network call). Capabilities given in the ModelConfig take precedence.
	// nil leaves the cache to [Client.ProbeModel].
	ProbeCache *ProbeOptions
	// PromptCache selects prompt caching (see [PromptCacheMode]); empty
	// takes $SAGE_PROMPT_CACHE, else auto.
	PromptCache PromptCacheMode
}

// ResponseLimits bounds the memory one response can take, streamed or not,
// so that a broken or hostile server cannot grow it without end. Passing a
// bound fails the call with an [*Error] of kind KindResponseTooLarge
// (errors.Is(err, ErrResponseTooLarge)); a stream keeps what it assembled
// before, in its *PartialStreamError.
type ResponseLimits struct {
	// Bytes bounds the text held: content, reasoning, refusals and tool-call
	// ids, names, arguments and extra fields, over all choices; for Chat, the
	// response body. Default 16 MiB.
	Bytes     int
	Choices   int // default 128
	ToolCalls int // over all choices; default 1024
}

// Default response limits.
const (
	DefaultMaxResponseBytes = 16 << 20
	DefaultMaxChoices       = 128
	DefaultMaxToolCalls     = 1024
)

func (l ResponseLimits) withDefaults() ResponseLimits {
	orDefault(&l.Bytes, DefaultMaxResponseBytes)
	orDefault(&l.Choices, DefaultMaxChoices)
	orDefault(&l.ToolCalls, DefaultMaxToolCalls)
	return l
}

// orDefault sets *v to d when it is zero or negative (not set).
func orDefault[T ~int | ~int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// RetryPolicy bounds retries. Zero fields take the defaults noted.
type RetryPolicy struct {
	MaxAttempts    int           // total attempts, default 4; 1 disables retries
	InitialBackoff time.Duration // default 500ms, doubled per attempt
	MaxBackoff     time.Duration // default 20s
	MaxElapsed     time.Duration // total time budget across attempts, default 2m
	MaxRetryAfter  time.Duration // longest Retry-After honoured, default 60s
	// Sleep waits between attempts; tests inject a recorder. Default: a
	// timer that stops early when ctx is done.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a value in [0,1) for jitter. Default: math/rand/v2.
	Rand func() float64
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	orDefault(&p.MaxAttempts, 4)
	orDefault(&p.InitialBackoff, 500*time.Millisecond)
	orDefault(&p.MaxBackoff, 20*time.Second)
	orDefault(&p.MaxElapsed, 2*time.Minute)
	orDefault(&p.MaxRetryAfter, time.Minute)
	if p.Sleep == nil {
		p.Sleep = ctxsleep.Sleep
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

// inherit fills empty connection fields of m from std.
func (m ModelConfig) inherit(std ModelConfig) ModelConfig {
	if m.BaseURL == "" {
		m.BaseURL = std.BaseURL
	}
	if m.APIKey == "" {
		m.APIKey = std.APIKey
	}
	return m
}

func splitKeys(s string) []string {
	var keys []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		keys = []string{""} // servers such as Ollama need no key
	}
	return keys
}

func (c Config) validate() error {
	if c.Standard.Model == "" {
		return &ConfigError{Field: "Standard.Model", Reason: "empty"}
	}
	if c.Standard.BaseURL == "" {
		return &ConfigError{Field: "Standard.BaseURL", Reason: "empty"}
	}
	for _, u := range []struct{ field, url string }{
		{"Standard.BaseURL", c.Standard.BaseURL}, {"Fast.BaseURL", c.Fast.BaseURL}, {"Embedding.BaseURL", c.Embedding.BaseURL}} {
		if err := checkBaseURL(u.url); u.url != "" && err != nil {
			return &ConfigError{Field: u.field, Reason: err.Error()}
		}
	}
	if c.EmbeddingBatchSize < 0 {
		return &ConfigError{Field: "EmbeddingBatchSize", Reason: "negative"}
	}
	return nil
}

// checkBaseURL refuses a base URL no request could be sent to, so that
// it is a bad setting rather than a connection error retried.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL (%v); want one such as http://localhost:11434/v1", s, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http:// or https:// URL, such as http://localhost:11434/v1", s)
	case u.Host == "":
		return fmt.Errorf("%q has no host; want one such as http://localhost:11434/v1", s)
	}
	return nil
}
