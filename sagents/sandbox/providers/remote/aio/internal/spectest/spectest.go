// Package spectest loads the published AIO Sandbox OpenAPI document and
// validates HTTP traffic against it with kin-openapi. Only tests import
// it.
package spectest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// SpecRel is the document's path relative to the module root's parent.
const SpecRel = "shared/spec/aio-sandbox-openapi.json"

// Find walks up from the working directory to the module root (the
// directory holding go.mod) and returns <root>/../shared/spec/....
func Find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(filepath.Dir(dir), filepath.FromSlash(SpecRel))
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("spec not found at %s: %w", p, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Validator checks requests and responses against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]map[int]int // "METHOD /path" -> status -> count
}

var (
	loadOnce sync.Once
	loaded   *Validator
	loadErr  error
)

// Load returns the shared Validator. A missing document fails the test
// when CI=true and skips it otherwise.
func Load(t testing.TB) *Validator {
	t.Helper()
	p, err := Find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("AIO OpenAPI document: %v", err)
		}
		t.Skipf("AIO OpenAPI document: %v (set CI=true to make this fatal)", err)
	}
	loadOnce.Do(func() { loaded, loadErr = load(p) })
	if loadErr != nil {
		t.Fatalf("load %s: %v", p, loadErr)
	}
	return loaded
}

// load reads the document. Quirks handled here: the document is OpenAPI
// 3.1 (type: "null" in anyOf), so schemas are validated with JSON Schema
// 2020-12; it names no servers, so requests to any host match; and the
// document itself is validated with the checks that 3.1 documents pass.
func load(p string) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(p)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("document invalid: %w", err)
	}
	doc.Servers = nil
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Validator{doc: doc, router: r, seen: map[string]map[int]int{}}, nil
}

func (v *Validator) options() *openapi3filter.Options {
	return &openapi3filter.Options{
		MultiError:              true,
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020()},
	}
}

// Check validates one exchange and records its endpoint and status.
// Statuses the document does not list (401, 403, 404, 413, ...) have their
// JSON body checked against the generic envelope schema "Response".
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) error {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s: no route in the spec: %w", req.Method, req.URL.Path, err)
	}
	v.record(req.Method+" "+route.Path, status)
	in := &openapi3filter.RequestValidationInput{Request: cloneWithBody(req, reqBody), PathParams: params,
		Route: route, Options: v.options()}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s: request does not match the spec: %w", req.Method, route.Path, err)
	}
	if route.Operation.Responses.Status(status) == nil {
		return v.checkEnvelope(req.Method+" "+route.Path, status, header, respBody)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: v.options()}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s: %d response does not match the spec: %w", req.Method, route.Path, status, err)
	}
	return nil
}

func (v *Validator) checkEnvelope(endpoint string, status int, header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%s: undocumented status %d with Content-Type %q (want the JSON envelope)", endpoint, status, ct)
	}
	var val any
	if err := json.Unmarshal(body, &val); err != nil {
		return fmt.Errorf("%s: %d body is not JSON: %w", endpoint, status, err)
	}
	schema := v.doc.Components.Schemas["Response"].Value
	if err := schema.VisitJSON(val, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("%s: %d body is not the envelope: %w", endpoint, status, err)
	}
	if m, ok := val.(map[string]any); !ok || m["success"] != false {
		return fmt.Errorf("%s: %d body does not say success:false: %s", endpoint, status, body)
	}
	return nil
}

func cloneWithBody(req *http.Request, body []byte) *http.Request {
	c := req.Clone(context.Background())
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	return c
}

func (v *Validator) record(endpoint string, status int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen[endpoint] == nil {
		v.seen[endpoint] = map[int]int{}
	}
	v.seen[endpoint][status]++
}

// Seen lists the endpoints and statuses validated so far.
func (v *Validator) Seen() map[string][]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string][]int{}
	for ep, st := range v.seen {
		for s := range st {
			out[ep] = append(out[ep], s)
		}
		sort.Ints(out[ep])
	}
	return out
}

// Transport wraps base: every exchange through it is validated, and a
// mismatch fails t.
func (v *Validator) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	return &transport{v: v, t: t, base: base}
}

type transport struct {
	v    *Validator
	t    testing.TB
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.ContentLength = int64(len(b))
		req.Header.Set("Content-Length", strconv.Itoa(len(b)))
	}
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if err := tr.v.Check(req, reqBody, resp.StatusCode, resp.Header, respBody); err != nil {
		tr.t.Errorf("OpenAPI conformance: %v", err)
	}
	return resp, nil
}
