package llm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/sage-go/sage/sagents/observability"
)

// Client is the dual-model client. It is safe for concurrent use.
type Client struct {
	standard, fast, embedding *model

	http              *http.Client
	retry             RetryPolicy
	firstChunkTimeout time.Duration
	limits            ResponseLimits
	extras            extraStore // tool-call fields to send back, by call id
	embedBatch        int
	embedDims         int
	obs               *observability.Manager
}

// model is one configured model with its key rotation and capabilities.
type model struct {
	cfg     ModelConfig
	clients []*openai.Client // one per API key
	next    atomic.Uint64
	caps    capStore
	// cacheMode is the resolved prompt-cache mode of the client.
	cacheMode PromptCacheMode
}

// New builds a client. It makes no network calls; see [Probe].
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mode, err := promptCacheMode(cfg.PromptCache)
	if err != nil {
		return nil, err
	}
	hc := wrapHTTPClient(cfg.HTTPClient)
	c := &Client{
		http:              hc,
		retry:             cfg.Retry.withDefaults(),
		firstChunkTimeout: cfg.FirstChunkTimeout,
		embedBatch:        cfg.EmbeddingBatchSize,
		embedDims:         cfg.EmbeddingDimensions,
		obs:               cfg.Observer,
		limits:            cfg.Limits.withDefaults(),
	}
	if c.embedBatch == 0 {
		c.embedBatch = 64
	}
	c.standard = newModel(cfg.Standard, hc)
	c.fast = c.standard
	if cfg.Fast.Model != "" {
		c.fast = newModel(cfg.Fast.inherit(cfg.Standard), hc)
	}
	if cfg.Embedding.Model != "" {
		c.embedding = newModel(cfg.Embedding.inherit(cfg.Standard), hc)
	}
	if cfg.ProbeCache != nil {
		opts := cfg.ProbeCache.withDefaults()
		for _, m := range []*model{c.standard, c.fast} {
			if r := c.cachedReport(m, opts); r != nil {
				m.caps.caps = r.Capabilities
				m.caps.apply(m.cfg.Capabilities)
			}
		}
	}
	for _, m := range []*model{c.standard, c.fast} {
		m.cacheMode = mode
		m.caps.fill(cacheDefaults(m.cfg.BaseURL, m.cfg.Model))
	}
	return c, nil
}

func newModel(cfg ModelConfig, hc *http.Client) *model {
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	m := &model{cfg: cfg}
	m.caps.caps = cfg.Capabilities
	for _, key := range splitKeys(cfg.APIKey) {
		oc := openai.DefaultConfig(key)
		oc.BaseURL = cfg.BaseURL
		oc.HTTPClient = hc
		m.clients = append(m.clients, openai.NewClientWithConfig(oc))
	}
	return m
}

// client returns the go-openai client of the next API key.
func (m *model) client() *openai.Client {
	n := m.next.Add(1) - 1
	return m.clients[n%uint64(len(m.clients))]
}

func (c *Client) pick(t ModelType) *model {
	if t == Fast {
		return c.fast
	}
	return c.standard
}

// Model returns the model name a request of type t uses.
func (c *Client) Model(t ModelType) string { return c.pick(t).cfg.Model }

// Provider returns the gen_ai.provider.name of the model a request of type
// t uses (ModelConfig.Provider, else providerName of its base URL).
func (c *Client) Provider(t ModelType) string { return c.pick(t).provider() }

// BaseURL returns the base URL a request of type t uses.
func (c *Client) BaseURL(t ModelType) string { return c.pick(t).cfg.BaseURL }

// Capabilities returns what is currently known about the model of type t.
func (c *Client) Capabilities(t ModelType) Capabilities { return c.pick(t).caps.get() }

// SetCapabilities records known capabilities for the model of type t; Unknown
// fields leave the current answer in place.
func (c *Client) SetCapabilities(t ModelType, caps Capabilities) { c.pick(t).caps.apply(caps) }

// Chat sends a non-streaming chat completion, retrying as the policy allows.
func (c *Client) Chat(ctx context.Context, r Request) (resp *Response, err error) {
	m := c.pick(r.ModelType)
	ctx = c.observeStart(ctx, m, r, false)
	defer func() { c.observeEnd(ctx, resp, err) }()
	return send(ctx, c, m, r, c.chatOnce)
}

// send makes the call of r on m with once: attempts as the retry policy
// allows, and the call again without a parameter the server refused
// (call.adapt).
func send[T any](ctx context.Context, c *Client, m *model, r Request, once func(context.Context, *call) (T, error)) (T, error) {
	call, err := c.newCall(m, r)
	if err != nil {
		var zero T
		return zero, err
	}
	for {
		v, err := retryDo(ctx, c.retry, func(ctx context.Context) (T, error) { return once(ctx, call) })
		if call.adapt(err) {
			continue
		}
		return v, withModel(err, call.m.cfg.Model)
	}
}

func (c *Client) chatOnce(ctx context.Context, call *call) (*Response, error) {
	ex := &exchange{patch: call.plan.patch, keepBody: c.limits.Bytes}
	start := time.Now()
	// go-openai's decoded response is not used: it has no room for
	// "reasoning", content parts or tool-call extra fields. The transport
	// kept the body and it is decoded here.
	_, err := call.m.client().CreateChatCompletion(withExchange(ctx, ex), call.plan.req)
	if err != nil {
		return nil, classify(err, ex)
	}
	resp, err := decodeChatBody(ex.body, c.limits)
	if err != nil {
		return nil, err
	}
	resp.Latency = time.Since(start)
	c.extras.remember(resp)
	return resp, nil
}

// newCall starts a call with the tool-call fields to send back.
func (c *Client) newCall(m *model, r Request) (*call, error) {
	call, err := newCall(m, r)
	if err != nil {
		return nil, err
	}
	if x := c.extras.forMessages(r.Messages, r.ToolCallExtra); x != nil {
		call.extra = x
		call.replan()
	}
	return call, nil
}

func withModel(err error, name string) error {
	var e *Error
	if errors.As(err, &e) && e.Model == "" {
		e.Model = name
	}
	return err
}
