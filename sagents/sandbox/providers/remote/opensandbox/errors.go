package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
)

// maxJSONBody bounds a JSON response body.
const maxJSONBody = 8 << 20

// APIError is an error answer of the lifecycle server or of execd.
type APIError struct {
	Op      string // e.g. "create sandbox", "download /workspace/a.txt"
	Status  int    // HTTP status
	Code    string // the body's code, e.g. "NOT_FOUND"
	Message string
}

func (e *APIError) Error() string {
	msg := e.Message
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	return fmt.Sprintf("opensandbox: %s: HTTP %d: %s", e.Op, e.Status, msg)
}

// Unwrap maps the status to an io/fs sentinel: 404 is fs.ErrNotExist,
// 401 and 403 are fs.ErrPermission, 409 is fs.ErrExist.
func (e *APIError) Unwrap() error {
	switch e.Status {
	case http.StatusNotFound:
		return fs.ErrNotExist
	case http.StatusUnauthorized, http.StatusForbidden:
		return fs.ErrPermission
	case http.StatusConflict:
		return fs.ErrExist
	}
	return nil
}

// apiError reads an error body (bounded) into an *APIError.
func apiError(op string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Op: op, Status: resp.StatusCode}
	var body struct{ Code, Message string }
	if json.Unmarshal(b, &body) == nil && (body.Code != "" || body.Message != "") {
		e.Code, e.Message = body.Code, body.Message
	} else {
		e.Message = string(bytes.TrimSpace(b))
	}
	return e
}

// wire is an HTTP client for one base URL with fixed headers.
type wire struct {
	base    string // no trailing slash
	headers map[string]string
	hc      *http.Client
}

// request sends method path?query with body (JSON-encoded unless it is
// an io.Reader) and returns the response when its status is want;
// otherwise the error body as an *APIError.
func (w *wire) request(ctx context.Context, op, method, path string, q url.Values, body any, want ...int) (*http.Response, error) {
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("opensandbox: %s: %w", op, err)
		}
		rd, ctype = bytes.NewReader(j), "application/json"
	}
	u := w.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("opensandbox: %s: %w", op, err)
	}
	for k, v := range w.headers {
		req.Header.Set(k, v)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if r, ok := body.(interface{ ContentType() string }); ok {
		req.Header.Set("Content-Type", r.ContentType())
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("opensandbox: %s: %w", op, err)
	}
	for _, s := range want {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, apiError(op, resp)
}

// call is request followed by decoding a bounded JSON body into out
// (nil: the body is drained and dropped).
func (w *wire) call(ctx context.Context, op, method, path string, q url.Values, body, out any, want ...int) error {
	resp, err := w.request(ctx, op, method, path, q, body, want...)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody+1))
	if err != nil {
		return fmt.Errorf("opensandbox: %s: reading the answer: %w", op, err)
	}
	if len(b) > maxJSONBody {
		return fmt.Errorf("opensandbox: %s: answer larger than %d bytes", op, maxJSONBody)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("opensandbox: %s: bad answer %.80q: %w", op, b, err)
	}
	return nil
}

// fetch is request followed by reading at most max bytes of the answer's
// body (the body is closed; the response is returned for its headers).
func (w *wire) fetch(ctx context.Context, op, path string, q url.Values, max int64, want ...int) (*http.Response, []byte, error) {
	resp, err := w.request(ctx, op, http.MethodGet, path, q, nil, want...)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max))
	if err != nil {
		return nil, nil, fmt.Errorf("opensandbox: %s: %w", op, err)
	}
	return resp, b, nil
}
