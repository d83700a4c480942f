package aioapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxResponseBytes bounds a JSON answer read into memory.
const maxResponseBytes = 256 << 20

// ClientOptions configure a Client.
type ClientOptions struct {
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// Transport replaces the default transport (tests wrap it to validate
	// traffic). The default is a keep-alive transport that bypasses
	// proxies for loopback and private addresses.
	Transport http.RoundTripper
}

// Client is a typed client for one AIO sandbox. It is safe for concurrent
// use; deadlines come from each call's context.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// NewClient returns a client for the sandbox at serverURL
// (http[s]://host[:port][/prefix]).
func NewClient(serverURL string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("aio: server URL %q: want http[s]://host[:port]", serverURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	rt := opts.Transport
	if rt == nil {
		rt = NewTransport()
	}
	return &Client{base: u, token: opts.Token, hc: &http.Client{Transport: rt}}, nil
}

// NewTransport returns the default transport: keep-alive, and no proxy for
// loopback, private and link-local addresses (ProxyFromEnvironment
// otherwise).
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = noProxyForLocal
	t.MaxIdleConnsPerHost = 32
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// noProxyForLocal is the transport's proxy function: nil for loopback, private and
// link-local hosts, http.ProxyFromEnvironment for the rest.
func noProxyForLocal(req *http.Request) (*url.URL, error) {
	if directHost(req.URL.Hostname()) {
		return nil, nil
	}
	return http.ProxyFromEnvironment(req)
}

func directHost(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast())
}

// CloseIdle closes idle keep-alive connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

func (c *Client) newRequest(ctx context.Context, method, p string, q url.Values, body io.Reader) (*http.Request, error) {
	u := *c.base
	u.Path += p
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("aio: %s %s: %w", method, p, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// send performs req and returns the body of a 2xx answer; other statuses
// become *APIError.
func (c *Client) send(req *http.Request) ([]byte, error) { return c.sendLimit(req, maxResponseBytes) }

// sendLimit is send reading at most limit bytes of the answer.
func (c *Client) sendLimit(req *http.Request, limit int64) ([]byte, error) {
	endpoint := req.Method + " " + strings.TrimPrefix(req.URL.Path, c.base.Path)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("aio: %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("aio: %s: read answer: %w", endpoint, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newAPIError(resp.StatusCode, endpoint, body)
	}
	return body, nil
}

// call sends a JSON request and decodes the envelope's data into out.
func (c *Client) call(ctx context.Context, method, p string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("aio: %s %s: encode: %w", method, p, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, p, nil, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	raw, err := c.send(req)
	if err != nil {
		return err
	}
	return decodeEnvelope(raw, method+" "+p, out)
}

func decodeEnvelope(raw []byte, endpoint string, out any) error {
	var env Envelope[json.RawMessage]
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("aio: %s: decode answer: %w", endpoint, err)
	}
	if !env.Success {
		return newAPIError(http.StatusOK, endpoint, raw)
	}
	if out == nil || len(env.Data) == 0 || string(env.Data) == "null" {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("aio: %s: decode data: %w", endpoint, err)
	}
	return nil
}

// post sends in as JSON to the endpoint at path and decodes the
// envelope's data as an Out (as far as it got when the error is not nil).
func post[Out any](ctx context.Context, c *Client, path string, in any) (*Out, error) {
	var out Out
	return &out, c.call(ctx, http.MethodPost, path, in, &out)
}

// Sandbox is GET /v1/sandbox: the sandbox's home, workspace and version.
func (c *Client) Sandbox(ctx context.Context) (*SandboxContext, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/sandbox", nil, nil)
	if err != nil {
		return nil, err
	}
	raw, err := c.send(req)
	if err != nil {
		return nil, err
	}
	var info SandboxContext
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("aio: GET /v1/sandbox: decode answer: %w", err)
	}
	return &info, nil
}

// BashExec is POST /v1/bash/exec (separate stdout and stderr).
func (c *Client) BashExec(ctx context.Context, r BashExecRequest) (*BashExecResult, error) {
	return post[BashExecResult](ctx, c, "/v1/bash/exec", r)
}

// BashOutput is POST /v1/bash/output: output from byte offsets.
func (c *Client) BashOutput(ctx context.Context, r BashOutputRequest) (*BashOutputResult, error) {
	return post[BashOutputResult](ctx, c, "/v1/bash/output", r)
}

// BashKill is POST /v1/bash/kill.
func (c *Client) BashKill(ctx context.Context, r BashKillRequest) error {
	return c.call(ctx, http.MethodPost, "/v1/bash/kill", r, nil)
}

// BashCreateSession is POST /v1/bash/sessions/create.
func (c *Client) BashCreateSession(ctx context.Context, r BashSessionCreateRequest) (*BashSessionInfo, error) {
	return post[BashSessionInfo](ctx, c, "/v1/bash/sessions/create", r)
}

// BashCloseSession is POST /v1/bash/sessions/{id}/close.
func (c *Client) BashCloseSession(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/v1/bash/sessions/"+url.PathEscape(id)+"/close", nil, nil)
}

// ReadFile is POST /v1/file/read (text files).
func (c *Client) ReadFile(ctx context.Context, r FileReadRequest) (*FileReadResult, error) {
	return post[FileReadResult](ctx, c, "/v1/file/read", r)
}

// WriteFile is POST /v1/file/write.
func (c *Client) WriteFile(ctx context.Context, r FileWriteRequest) (*FileWriteResult, error) {
	return post[FileWriteResult](ctx, c, "/v1/file/write", r)
}

// ListFiles is POST /v1/file/list.
func (c *Client) ListFiles(ctx context.Context, r FileListRequest) (*FileListResult, error) {
	return post[FileListResult](ctx, c, "/v1/file/list", r)
}

// FindFiles is POST /v1/file/find.
func (c *Client) FindFiles(ctx context.Context, r FileFindRequest) (*FileFindResult, error) {
	return post[FileFindResult](ctx, c, "/v1/file/find", r)
}

// GrepFiles is POST /v1/file/grep.
func (c *Client) GrepFiles(ctx context.Context, r FileGrepRequest) (*FileGrepResult, error) {
	return post[FileGrepResult](ctx, c, "/v1/file/grep", r)
}

// Download is GET /v1/file/download: the file's bytes, at most limit
// (limit <= 0 means maxResponseBytes).
func (c *Client) Download(ctx context.Context, path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = maxResponseBytes
	}
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/file/download", url.Values{"path": {path}}, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/octet-stream, application/json")
	body, err := c.sendLimit(req, limit+1)
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("aio: GET /v1/file/download %q: larger than %d bytes", path, limit)
	}
	return body, nil
}

// Upload is POST /v1/file/upload: content becomes the file at path,
// streamed as multipart/form-data.
func (c *Client) Upload(ctx context.Context, path string, content io.Reader) (*FileUploadResult, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("path", path)
		if err == nil {
			var fw io.Writer
			if fw, err = mw.CreateFormFile("file", baseName(path)); err == nil {
				_, err = io.Copy(fw, content)
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/file/upload", nil, pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	raw, err := c.send(req)
	pr.Close()
	if err != nil {
		return nil, err
	}
	var out FileUploadResult
	return &out, decodeEnvelope(raw, "POST /v1/file/upload", &out)
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return "upload"
	}
	return p
}
