package provisioner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// backendName is the name the client registers under with the aio
// provider, and the Backend field of the SandboxInfo values it returns.
const backendName = "provisioner"

// maxAnswerBytes bounds an answer read into memory.
const maxAnswerBytes = 8 << 20

func init() { orchestrator.RegisterBackend(backendName, backendFromConfig) }

// Config keys and environment variables the registered factory reads.
const (
	configURL    = "provisioner_url"     // else $SAGE_PROVISIONER_URL
	configAPIKey = "provisioner_api_key" // else $SAGE_PROVISIONER_API_KEY
	envURL       = "SAGE_PROVISIONER_URL"
	EnvAPIKey    = "SAGE_PROVISIONER_API_KEY"
)

// backendFromConfig is the orchestrator.BackendFactory: provisioner_url and
// provisioner_api_key from the provider config, else from the environment.
func backendFromConfig(cfg map[string]any) (orchestrator.Backend, error) {
	u, key := configString(cfg, configURL, envURL), configString(cfg, configAPIKey, EnvAPIKey)
	if u == "" {
		return nil, fmt.Errorf("provisioner: no URL: set %s in the provider config or $%s", configURL, envURL)
	}
	return newClientBackend(u, key)
}

func configString(cfg map[string]any, key, env string) string {
	if s, ok := cfg[key].(string); ok && s != "" {
		return s
	}
	return os.Getenv(env)
}

// clientOptions configure an apiClient.
type clientOptions struct {
	// Transport replaces the default (aioapi.NewTransport: keep-alive, no
	// proxy for loopback and private addresses).
	Transport http.RoundTripper
}

// apiClient speaks the provisioner API. It implements orchestrator.Backend and is
// safe for concurrent use; deadlines come from each call's context.
type apiClient struct {
	base   *url.URL
	apiKey string
	hc     *http.Client
}

var _ orchestrator.Backend = (*apiClient)(nil)

// newAPIClient returns a client for the provisioner at baseURL
// (http[s]://host[:port][/prefix]); apiKey is sent as X-API-Key when set.
func newAPIClient(baseURL, apiKey string, opts ...clientOptions) (*apiClient, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provisioner: URL %q: want http[s]://host[:port]", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	var o clientOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Transport == nil {
		o.Transport = aioapi.NewTransport()
	}
	return &apiClient{base: u, apiKey: apiKey, hc: &http.Client{Transport: o.Transport}}, nil
}

// newClientBackend is newAPIClient as an orchestrator.Backend.
func newClientBackend(baseURL, apiKey string, opts ...clientOptions) (orchestrator.Backend, error) {
	c, err := newAPIClient(baseURL, apiKey, opts...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Create asks for a sandbox (POST /api/sandboxes). The provisioner's own
// configuration decides image, port and resources; req's are not sent.
func (c *apiClient) Create(ctx context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	fence, err := orchestrator.Fence(ctx)
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("provisioner: create %s: %w", req.SandboxID, err)
	}
	body := createBody{SandboxID: req.SandboxID, ThreadID: req.ThreadID, ExtraMounts: mountsToWire(req.Mounts),
		Owner: req.Owner, Env: req.Env, Token: req.Token, Fence: fence, PoolSlot: req.PoolSlot}
	var out wireSandbox
	if err := c.do(ctx, http.MethodPost, "/api/sandboxes", body, &out); err != nil {
		return orchestrator.SandboxInfo{}, err
	}
	info := fromWire(out)
	info.Token = req.Token
	return info, nil
}

// Destroy removes it (DELETE /api/sandboxes/{id}, with the caller's
// fencing token in X-Sage-Fence); 404 is not an error.
func (c *apiClient) Destroy(ctx context.Context, info orchestrator.SandboxInfo) error {
	fence, err := orchestrator.Fence(ctx)
	if err != nil {
		return fmt.Errorf("provisioner: destroy %s: %w", info.SandboxID, err)
	}
	err = c.do(withFenceHeader(ctx, fence), http.MethodDelete, sandboxPath(info.SandboxID), nil, nil)
	if isNotFound(err) {
		return nil
	}
	return err
}

// Adopt implements orchestrator.Adopter (POST /api/sandboxes/{id}/adopt):
// the server's backend refuses a sandbox that carries a newer fencing
// token and stamps the caller's where it can. A server without the call
// (404) leaves the sandbox as it is.
func (c *apiClient) Adopt(ctx context.Context, info orchestrator.SandboxInfo) (orchestrator.SandboxInfo, error) {
	fence, err := orchestrator.Fence(ctx)
	if err != nil || fence == 0 {
		return info, err
	}
	var out wireSandbox
	err = c.do(ctx, http.MethodPost, sandboxPath(info.SandboxID)+"/adopt", adoptBody{Fence: fence}, &out)
	if isNotFound(err) {
		return info, nil
	}
	if err != nil {
		return info, err
	}
	info.Fence = out.Fence
	return info, nil
}

var _ orchestrator.Adopter = (*apiClient)(nil)

var _ orchestrator.Pooler = (*apiClient)(nil)

// Claim implements orchestrator.Pooler (POST /api/pool/{slot}/claim,
// with the caller's fencing token): the provisioner's backend hands the
// unclaimed pool sandbox to the thread. A provisioner whose backend keeps
// no pool answers 404.
func (c *apiClient) Claim(ctx context.Context, pooled orchestrator.SandboxInfo, sandboxID, threadID string) (orchestrator.SandboxInfo, error) {
	fence, err := orchestrator.Fence(ctx)
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("provisioner: claim %s: %w", pooled.SandboxID, err)
	}
	var out wireSandbox
	if err := c.do(ctx, http.MethodPost, "/api/pool/"+url.PathEscape(pooled.PoolSlot)+"/claim",
		claimBody{SandboxID: sandboxID, ThreadID: threadID, Fence: fence}, &out); err != nil {
		return orchestrator.SandboxInfo{}, err
	}
	info := fromWire(out)
	info.Token = pooled.Token
	return info, nil
}

// ListPool implements orchestrator.Pooler (GET /api/pool).
func (c *apiClient) ListPool(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	var out wireSandboxList
	if err := c.do(ctx, http.MethodGet, "/api/pool", nil, &out); err != nil {
		return nil, err
	}
	infos := make([]orchestrator.SandboxInfo, 0, len(out.Sandboxes))
	for _, s := range out.Sandboxes {
		infos = append(infos, fromWire(s))
	}
	return infos, nil
}

type fenceHeaderKey struct{}

func withFenceHeader(ctx context.Context, fence int64) context.Context {
	if fence == 0 {
		return ctx
	}
	return context.WithValue(ctx, fenceHeaderKey{}, fence)
}

// Get returns one sandbox (GET /api/sandboxes/{id}); a 404 is an error
// matching ErrNotFound. The call counts as activity for the idle reaper.
func (c *apiClient) Get(ctx context.Context, sandboxID string) (wireSandbox, error) {
	var out wireSandbox
	err := c.do(ctx, http.MethodGet, sandboxPath(sandboxID), nil, &out)
	return out, err
}

// Discover finds a running sandbox by id; not found is ok false, nil.
func (c *apiClient) Discover(ctx context.Context, sandboxID string) (orchestrator.SandboxInfo, bool, error) {
	s, err := c.Get(ctx, sandboxID)
	if isNotFound(err) {
		return orchestrator.SandboxInfo{}, false, nil
	}
	if err != nil {
		return orchestrator.SandboxInfo{}, false, err
	}
	return fromWire(s), true, nil
}

// IsAlive reports whether the provisioner still runs it.
func (c *apiClient) IsAlive(ctx context.Context, info orchestrator.SandboxInfo) (bool, error) {
	_, ok, err := c.Discover(ctx, info.SandboxID)
	return ok, err
}

// Touch records activity on the sandbox so the provisioner's idle reaper
// spares it; it is a GET. Providers that serve a thread from their cache
// for longer than the provisioner's TTL should call it now and then.
func (c *apiClient) Touch(ctx context.Context, sandboxID string) error {
	_, err := c.Get(ctx, sandboxID)
	return err
}

// ListRunning lists the provisioner's sandboxes (GET /api/sandboxes).
func (c *apiClient) ListRunning(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	var out wireSandboxList
	if err := c.do(ctx, http.MethodGet, "/api/sandboxes", nil, &out); err != nil {
		return nil, err
	}
	infos := make([]orchestrator.SandboxInfo, 0, len(out.Sandboxes))
	for _, s := range out.Sandboxes {
		infos = append(infos, fromWire(s))
	}
	return infos, nil
}

// Health calls GET /health; a non-2xx answer (503 when the backend is
// unreachable) is an *APIError.
func (c *apiClient) Health(ctx context.Context) (healthBody, error) {
	var out healthBody
	err := c.do(ctx, http.MethodGet, "/health", nil, &out)
	return out, err
}

func sandboxPath(id string) string { return "/api/sandboxes/" + url.PathEscape(id) }

func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
	endpoint := method + " " + path
	req, err := c.newRequest(ctx, method, path, in)
	if err != nil {
		return fmt.Errorf("provisioner: %s: %w", endpoint, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("provisioner: %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("provisioner: %s: reading answer: %w", endpoint, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(endpoint, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("provisioner: %s: decoding answer: %w", endpoint, err)
	}
	return nil
}

func (c *apiClient) newRequest(ctx context.Context, method, path string, in any) (*http.Request, error) {
	var body io.Reader
	var err error
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path // path is already escaped
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("X-API-Key", c.apiKey)
	}
	if f, ok := ctx.Value(fenceHeaderKey{}).(int64); ok {
		req.Header.Set(fenceHeaderName, strconv.FormatInt(f, 10))
	}
	return req, nil
}

// answerError decodes {"detail": ...}; FastAPI validation errors carry a
// list there, which is kept as JSON text.
func answerError(endpoint string, status int, data []byte) *APIError {
	e := &APIError{Status: status, Endpoint: endpoint}
	var body struct {
		Detail json.RawMessage `json:"detail"`
		Code   string          `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && len(body.Detail) > 0 {
		var s string
		if json.Unmarshal(body.Detail, &s) != nil {
			s = string(body.Detail)
		}
		e.Message, e.Code = s, body.Code
	} else {
		e.Message = strings.TrimSpace(string(data))
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	if len(e.Message) > 512 {
		e.Message = e.Message[:512] + "..."
	}
	return e
}
