// Package spectest validates HTTP traffic of the AIO Sandbox API with
// kin-openapi against the project's own document of the subset sage
// sandboxd serves (api/aio-subset.openapi.yaml, embedded), and
// additionally against the published upstream document when a checkout
// has it at ../shared/spec. Only tests import it.
package spectest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

	"github.com/sage-go/sage/api"
)

// UpstreamRel is the upstream document's path relative to the module
// root's parent.
const UpstreamRel = "shared/spec/aio-sandbox-openapi.json"

// FindUpstream walks up from the working directory to the module root
// (the directory holding go.mod) and returns <root>/../shared/spec/....
// The error wraps fs.ErrNotExist when the document is not there.
func FindUpstream() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(filepath.Dir(dir), filepath.FromSlash(UpstreamRel))
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("upstream AIO document not found at %s: %w", p, err)
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

// Document is one loaded OpenAPI document.
type Document struct {
	Name   string
	doc    *openapi3.T
	router routers.Router
	// strict documents list every status the server answers; an
	// undocumented status is a mismatch. The upstream document lists only
	// 200 and 422, so other statuses are checked against its generic
	// envelope.
	strict bool
}

// Validator checks requests and responses against one or more documents.
type Validator struct {
	docs []*Document

	mu   sync.Mutex
	seen map[string]map[int]int // "METHOD /path" -> status -> count
}

var (
	loadOnce sync.Once
	loaded   *Validator
	loadErr  error
)

// Load returns the shared Validator: the project's subset document always,
// plus the upstream document when ../shared/spec holds it. A document that
// is present but does not load fails the test.
func Load(t testing.TB) *Validator {
	t.Helper()
	loadOnce.Do(func() {
		var docs []*Document
		sub, err := LoadSubset()
		if err != nil {
			loadErr = err
			return
		}
		docs = append(docs, sub)
		up, err := LoadUpstream()
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			loadErr = err
			return
		default:
			docs = append(docs, up)
		}
		loaded = NewValidator(docs...)
	})
	if loadErr != nil {
		t.Fatalf("OpenAPI document: %v", loadErr)
	}
	return loaded
}

// Operations lists the document's operations as "METHOD /path", sorted.
func (d *Document) Operations() []string {
	var ops []string
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	return ops
}

// NewValidator validates against every one of docs.
func NewValidator(docs ...*Document) *Validator {
	return &Validator{docs: docs, seen: map[string]map[int]int{}}
}

// Documents names the documents v checks against.
func (v *Validator) Documents() []string {
	var names []string
	for _, d := range v.docs {
		names = append(names, d.Name)
	}
	return names
}

// LoadSubset loads the project's own document (api/aio-subset.openapi.yaml).
func LoadSubset() (*Document, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.AIOSubset)
	if err != nil {
		return nil, fmt.Errorf("api/aio-subset.openapi.yaml: %w", err)
	}
	return prepare("api/aio-subset.openapi.yaml", doc, true)
}

// LoadUpstream loads the upstream document from ../shared/spec; the error
// wraps fs.ErrNotExist when this checkout has none.
func LoadUpstream() (*Document, error) {
	p, err := FindUpstream()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return prepare(p, doc, false)
}

// prepare validates the document itself and builds its router. Both
// documents are OpenAPI 3.1 (type "null", type arrays), so schemas are
// validated with JSON Schema 2020-12; servers are dropped so requests to
// any host match.
func prepare(name string, doc *openapi3.T, strict bool) (*Document, error) {
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s: document invalid: %w", name, err)
	}
	doc.Servers = nil
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Document{Name: name, doc: doc, router: r, strict: strict}, nil
}

func options() *openapi3filter.Options {
	return &openapi3filter.Options{
		MultiError:              true,
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020()},
	}
}

// Check validates one exchange against every document and records its
// endpoint and status.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) error {
	var errs []error
	for i, d := range v.docs {
		endpoint, err := d.check(req, reqBody, status, header, respBody)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Name, err))
		}
		if i == 0 && endpoint != "" {
			v.record(endpoint, status)
		}
	}
	return errors.Join(errs...)
}

// check validates one exchange against d and returns the endpoint it
// matched ("METHOD /path").
func (d *Document) check(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) (string, error) {
	route, params, err := d.router.FindRoute(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: no route in the document: %w", req.Method, req.URL.Path, err)
	}
	endpoint := req.Method + " " + route.Path
	in := &openapi3filter.RequestValidationInput{Request: cloneWithBody(req, reqBody), PathParams: params,
		Route: route, Options: options()}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return endpoint, fmt.Errorf("%s: request does not match: %w", endpoint, err)
	}
	if route.Operation.Responses.Status(status) == nil {
		if d.strict {
			return endpoint, fmt.Errorf("%s: status %d is not documented for this endpoint", endpoint, status)
		}
		return endpoint, d.checkEnvelope(endpoint, status, header, respBody)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: options()}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return endpoint, fmt.Errorf("%s: %d response does not match: %w", endpoint, status, err)
	}
	return endpoint, nil
}

func (d *Document) checkEnvelope(endpoint string, status int, header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%s: undocumented status %d with Content-Type %q (want the JSON envelope)", endpoint, status, ct)
	}
	var val any
	if err := json.Unmarshal(body, &val); err != nil {
		return fmt.Errorf("%s: %d body is not JSON: %w", endpoint, status, err)
	}
	schema := d.doc.Components.Schemas["Response"].Value
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
	// kin-openapi reads the body through GetBody when it is set, which
	// would otherwise be the original request's body.
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
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
