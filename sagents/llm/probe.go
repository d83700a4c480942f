package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// ProbeOptions tunes [Client.ProbeModel]. Zero fields take the defaults noted.
type ProbeOptions struct {
	ModelType      ModelType
	ConnectTimeout time.Duration // the connection probe, default 15s
	ProbeTimeout   time.Duration // each optional probe, default 30s
	TTL            time.Duration // cache lifetime, default 24h
	NoCache        bool          // neither read nor write the disk cache
	Refresh        bool          // ignore a cached result, then write the new one
	CacheDir       string        // default $SAGE_HOME/cache/llm-probes
	Now            func() time.Time
}

func (o ProbeOptions) withDefaults() ProbeOptions {
	orDefault(&o.ConnectTimeout, 15*time.Second)
	orDefault(&o.ProbeTimeout, 30*time.Second)
	orDefault(&o.TTL, 24*time.Hour)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Probe names.
const (
	ProbeConnection       = "connection"
	ProbeStructuredOutput = "structured_output"
	ProbeMultimodal       = "multimodal"
)

// ProbeResult is the outcome of one probe.
type ProbeResult struct {
	Name      string  `json:"name"`
	Result    Support `json:"result"`
	LatencyMS int64   `json:"latency_ms"`
	Detail    string  `json:"detail,omitempty"`
	// Failed says why a probe that must succeed (the connection) failed:
	// "refused", "dns", "timeout", "authentication", "not found", ... Its
	// Result is then Unknown: a failed connection says nothing about support.
	Failed string `json:"failed,omitempty"`
}

// ProbeReport is what probing one model found.
type ProbeReport struct {
	BaseURL      string        `json:"base_url"`
	Model        string        `json:"model"`
	Capabilities Capabilities  `json:"capabilities"`
	Probes       []ProbeResult `json:"probes"`
	CheckedAt    time.Time     `json:"checked_at"`
	Cached       bool          `json:"cached"`
}

// Probe learns the standard model's capabilities (using the disk cache) and
// records them in c. A connection failure is an error.
func Probe(ctx context.Context, c *Client) (Capabilities, error) {
	r, err := c.ProbeModel(ctx, ProbeOptions{})
	if err != nil {
		return Capabilities{}, err
	}
	return r.Capabilities, nil
}

// ProbeModel runs the connection probe, then the structured-output and
// multimodal probes concurrently, each under its own timeout. Answers are
// recorded in c; Unknown answers (timeouts, server errors) change nothing.
func (c *Client) ProbeModel(ctx context.Context, opts ProbeOptions) (*ProbeReport, error) {
	opts = opts.withDefaults()
	m := c.pick(opts.ModelType)
	if r := c.cachedReport(m, opts); r != nil {
		m.caps.apply(r.Capabilities)
		return r, nil
	}
	rep := &ProbeReport{BaseURL: m.cfg.BaseURL, Model: m.cfg.Model, CheckedAt: opts.Now().UTC()}
	conn, err := c.probeConnection(ctx, m, opts.ConnectTimeout)
	rep.Probes = append(rep.Probes, conn)
	if err != nil {
		return rep, fmt.Errorf("llm: probe %s at %s: %w", m.cfg.Model, m.cfg.BaseURL, err)
	}
	rep.Probes = append(rep.Probes, c.optionalProbes(ctx, m, opts.ProbeTimeout)...)
	rep.Capabilities = capsFrom(rep.Probes)
	m.caps.apply(rep.Capabilities)
	if !opts.NoCache {
		if err := writeCache(opts, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (c *Client) cachedReport(m *model, opts ProbeOptions) *ProbeReport {
	if opts.NoCache || opts.Refresh {
		return nil
	}
	r, err := readCache(opts, m.cfg.BaseURL, m.cfg.Model)
	if err != nil {
		return nil // a missing, stale or unreadable cache just means probing
	}
	return r
}

type probeFunc func(ctx context.Context, c *Client, m *model) (Support, string, error)

func (c *Client) optionalProbes(ctx context.Context, m *model, timeout time.Duration) []ProbeResult {
	probes := []struct {
		name string
		fn   probeFunc
	}{{ProbeStructuredOutput, probeStructured}, {ProbeMultimodal, probeMultimodal}}
	out := make([]ProbeResult, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i] = runProbe(pctx, p.name, func(ctx context.Context) (Support, string, error) { return p.fn(ctx, c, m) })
		})
	}
	wg.Wait()
	return out
}

func runProbe(ctx context.Context, name string, fn func(context.Context) (Support, string, error)) ProbeResult {
	start := time.Now()
	s, detail, err := fn(ctx)
	r := ProbeResult{Name: name, Result: s, Detail: detail, LatencyMS: time.Since(start).Milliseconds()}
	if err != nil {
		r.Detail = err.Error()
	}
	return r
}

func (c *Client) probeConnection(ctx context.Context, m *model, timeout time.Duration) (ProbeResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	r := runProbe(ctx, ProbeConnection, func(ctx context.Context) (Support, string, error) {
		req := Request{ChatCompletionRequest: openai.ChatCompletionRequest{
			MaxTokens: 16,
			Messages:  []openai.ChatCompletionMessage{{Role: "user", Content: "Reply with the single word: pong"}},
		}}
		var resp *Response
		if resp, err = c.probeChat(ctx, m, req); err != nil {
			return Unknown, "", err
		}
		return Supported, resp.Content(), nil
	})
	if err != nil {
		r.Failed = failureReason(err)
	}
	return r, err
}

// failureReason names why a connection probe failed, in a word or two.
func failureReason(err error) string {
	var dns *net.DNSError
	var e *Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &dns):
		return "dns"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.As(err, &e):
		return e.Kind.String()
	}
	return "error"
}

// probeChat sends req exactly as asked: no capability stripping, no retries.
func (c *Client) probeChat(ctx context.Context, m *model, r Request) (*Response, error) {
	call := &call{m: m, in: r, probing: true}
	call.replan()
	return c.chatOnce(ctx, call)
}

func probeStructured(ctx context.Context, c *Client, m *model) (Support, string, error) {
	call := &call{m: m, probing: true, in: Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
		Messages: []openai.ChatCompletionMessage{{Role: "user",
			Content: `Reply with a JSON object whose key "ok" is true. Output only the JSON.`}},
	}}}
	call.replan()
	s, err := c.streamOnce(ctx, call)
	if err != nil {
		return verdict(err), "", err
	}
	resp, err := s.Collect()
	if err != nil {
		return verdict(err), "", err
	}
	var obj map[string]any
	text := stripFences(resp.Content())
	if json.Unmarshal([]byte(text), &obj) != nil || obj["ok"] == nil {
		return Unsupported, "reply is not a JSON object with key ok: " + clip(text), nil
	}
	return Supported, text, nil
}

func probeMultimodal(ctx context.Context, c *Client, m *model) (Support, string, error) {
	req := Request{ChatCompletionRequest: openai.ChatCompletionRequest{
		MaxTokens: 32,
		Messages: []openai.ChatCompletionMessage{{Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "What colour is this image? Answer with one word."},
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: redPNGDataURL()}},
		}}},
	}}
	resp, err := c.probeChat(ctx, m, req)
	if err != nil {
		return verdict(err), "", err
	}
	reply := resp.Content()
	if strings.Contains(strings.ToLower(reply), "red") {
		return Supported, reply, nil
	}
	return Unsupported, "reply does not name the colour: " + clip(reply), nil
}

// verdict maps a probe failure: a rejected request means unsupported;
// anything else (timeouts, server errors) leaves the answer unknown.
func verdict(err error) Support {
	var pe *PartialStreamError
	if errors.As(err, &pe) {
		return Unknown
	}
	if errors.Is(err, ErrBadRequest) {
		return Unsupported
	}
	return Unknown
}

func capsFrom(results []ProbeResult) Capabilities {
	var c Capabilities
	for _, r := range results {
		switch r.Name {
		case ProbeStructuredOutput:
			c.StructuredOutput = r.Result
		case ProbeMultimodal:
			c.Multimodal = r.Result
		}
	}
	return c
}

func stripFences(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "```json")
	s = strings.TrimPrefix(s, "```")
	return strings.TrimSpace(strings.TrimSuffix(s, "```"))
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// redPNG returns a 20x20 solid red PNG, made with image/png.
func redPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 20, 20))
	for y := 0; y < 20; y++ {
		for x := 0; x < 20; x++ {
			img.Set(x, y, color.RGBA{R: 255, A: 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img) // encoding an in-memory RGBA image cannot fail
	return buf.Bytes()
}

// redPNGDataURL is redPNG as a data: URL for an image_url part.
func redPNGDataURL() string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(redPNG())
}
