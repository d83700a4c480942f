package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyPatch is everything go-openai's request struct cannot express. The
// transport applies it to the JSON body in one rewriting step.
type bodyPatch struct {
	set  map[string]any // top-level fields to set, zero values included
	drop []string       // top-level fields to remove
	// fillReasoningContent adds "reasoning_content": "" to assistant messages
	// that carry tool calls and no reasoning content (DeepSeek thinking mode).
	fillReasoningContent bool
	// toolExtra holds fields to add to assistant tool calls, by call id.
	toolExtra map[string]map[string]json.RawMessage
	// cacheMarks are the indexes of the messages whose last content part
	// gets a cache_control breakpoint.
	cacheMarks []int
}

func (p bodyPatch) empty() bool {
	return len(p.set) == 0 && len(p.drop) == 0 && !p.fillReasoningContent && len(p.toolExtra) == 0 &&
		len(p.cacheMarks) == 0
}

// apply rewrites a JSON object body. Keys come out sorted (encoding/json
// sorts map keys), so the bytes sent are deterministic.
func (p bodyPatch) apply(body []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("llm: rewriting request body: %w", err)
	}
	for k, v := range p.set {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("llm: rewriting request body: field %q: %w", k, err)
		}
		obj[k] = raw
	}
	for _, k := range p.drop {
		delete(obj, k)
	}
	if p.fillReasoningContent {
		if err := fillReasoningContent(obj); err != nil {
			return nil, err
		}
	}
	if len(p.toolExtra) > 0 {
		if err := addToolCallExtras(obj, p.toolExtra); err != nil {
			return nil, err
		}
	}
	if len(p.cacheMarks) > 0 {
		if err := markCacheBreakpoints(obj, p.cacheMarks); err != nil {
			return nil, err
		}
	}
	return json.Marshal(obj)
}

func fillReasoningContent(obj map[string]json.RawMessage) error {
	return rewriteMessages(obj, func(m map[string]json.RawMessage) (bool, error) {
		_, hasRC := m["reasoning_content"]
		if string(m["role"]) == `"assistant"` && m["tool_calls"] != nil && !hasRC {
			m["reasoning_content"] = json.RawMessage(`""`)
			return true, nil
		}
		return false, nil
	})
}

// rewriteMessages applies edit to every message of the body's "messages"
// and encodes them again when edit changed any (it reports whether it
// did).
func rewriteMessages(obj map[string]json.RawMessage, edit func(m map[string]json.RawMessage) (bool, error)) error {
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(obj["messages"], &msgs); err != nil {
		return fmt.Errorf("llm: rewriting messages: %w", err)
	}
	changed := false
	for _, m := range msgs {
		c, err := edit(m)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	if !changed {
		return nil
	}
	raw, err := json.Marshal(msgs)
	obj["messages"] = raw
	return err
}

// exchange carries one attempt's patch into the transport and the response
// back out of it. It travels in the request context.
type exchange struct {
	patch bodyPatch
	// keepBody > 0 makes the transport read a successful response body (at
	// most keepBody bytes) into body before go-openai decodes it.
	keepBody int
	body     []byte
	// errBody is an error response's body (at most maxErrorBody bytes),
	// for what go-openai's decoding drops (a gateway's metadata).
	errBody []byte

	mu   sync.Mutex
	resp *http.Response
	sent []byte
}

type exchangeKey struct{}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

func exchangeFrom(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

func (ex *exchange) record(sent []byte, resp *http.Response) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if sent != nil {
		ex.sent = sent
	}
	if resp != nil {
		ex.resp = resp
	}
}

func (ex *exchange) response() *http.Response {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.resp
}

func (ex *exchange) retryAfter() time.Duration {
	resp := ex.response()
	if resp == nil {
		return 0
	}
	return parseRetryAfter(resp.Header, time.Now())
}

// rewriteTransport is the one place where request bodies are rewritten.
type rewriteTransport struct {
	base http.RoundTripper
}

func (t *rewriteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchangeFrom(req.Context())
	if ex == nil {
		return t.base.RoundTrip(req)
	}
	out, sent, err := rewrite(req, ex.patch)
	if err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(out)
	if err == nil && resp.StatusCode >= 300 {
		// go-openai reads error bodies whole: bound them, and keep them.
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		ex.mu.Lock()
		ex.errBody = b
		ex.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	if err == nil && ex.keepBody > 0 && resp.StatusCode < 300 {
		if err = ex.keep(resp); err != nil {
			return nil, err
		}
	}
	ex.record(sent, resp)
	return resp, err
}

// maxErrorBody bounds what is read of an error response.
const maxErrorBody = 1 << 20

// keep reads resp's body, bounded, and replaces it with the bytes read.
func (ex *exchange) keep(resp *http.Response) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(ex.keepBody)+1))
	if err != nil {
		return err
	}
	if len(body) > ex.keepBody {
		return tooLarge(fmt.Sprintf("a body of more than %d bytes", ex.keepBody))
	}
	ex.body = body
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// rewrite returns a clone of req whose body has the patch applied, and the
// body bytes that will be sent.
func rewrite(req *http.Request, p bodyPatch) (*http.Request, []byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil, nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("llm: reading request body: %w", err)
	}
	if !p.empty() {
		if body, err = p.apply(body); err != nil {
			return nil, nil, err
		}
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return out, body, nil
}

// wrapHTTPClient returns a copy of c (or of a zero client) whose transport
// rewrites bodies. The copy shares c's underlying transport, so connection
// pools, proxies and tracing wrappers are shared by every model.
func wrapHTTPClient(c *http.Client) *http.Client {
	if c == nil {
		c = &http.Client{}
	}
	cp := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = &rewriteTransport{base: base}
	return &cp
}
