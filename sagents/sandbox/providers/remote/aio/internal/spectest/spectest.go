// Package spectest validates HTTP traffic of the AIO Sandbox API with
// kin-openapi against the project's own document of the subset sage
// sandboxd serves (api/aio-subset.openapi.yaml, embedded), and
// additionally against the published upstream document when a checkout
// has it at ../shared/spec. Only tests import it.
package spectest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sage-go/sage/api"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/internal/openapitest"
)

// UpstreamRel is the upstream document's path inside the shared folder
// (testenv.SharedPath).
const UpstreamRel = "spec/aio-sandbox-openapi.json"

// FindUpstream returns the upstream document beside the repository
// (testenv.SharedPath: $SAGE_SHARED_DIR, or shared/ above the working
// directory). The error wraps fs.ErrNotExist when this checkout has none
// and SAGE_SHARED_DIR is unset.
func FindUpstream() (string, error) {
	return testenv.SharedPath(UpstreamRel)
}

// Document is one loaded OpenAPI document.
type Document struct {
	*openapitest.Doc
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
	d, err := openapitest.Load("api/aio-subset.openapi.yaml", api.AIOSubset)
	if err != nil {
		return nil, err
	}
	return &Document{Doc: d, strict: true}, nil
}

// LoadUpstream loads the upstream document from ../shared/spec; the error
// wraps fs.ErrNotExist when this checkout has none.
func LoadUpstream() (*Document, error) {
	p, err := FindUpstream()
	if err != nil {
		return nil, err
	}
	d, err := openapitest.LoadFile(p)
	if err != nil {
		return nil, err
	}
	return &Document{Doc: d}, nil
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
	in, err := d.CheckRequest(req, reqBody)
	if in == nil {
		return "", err
	}
	endpoint := req.Method + " " + in.Route.Path
	if err != nil {
		return endpoint, err
	}
	if in.Route.Operation.Responses.Status(status) == nil {
		if d.strict {
			return endpoint, fmt.Errorf("%s: status %d is not documented for this endpoint", endpoint, status)
		}
		return endpoint, d.checkEnvelope(endpoint, status, header, respBody)
	}
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt == "text/event-stream" {
		return endpoint, d.checkEvents(endpoint, in.Route.Operation, status, respBody)
	}
	return endpoint, d.CheckResponse(in, status, header, respBody)
}

// checkEvents validates an event stream answer: the operation must offer
// one (a text/event-stream content in the project's document; the
// upstream document only says so in the operation's description), and each
// event's data must be the operation's JSON answer.
func (d *Document) checkEvents(endpoint string, op *openapi3.Operation, status int, body []byte) error {
	resp := op.Responses.Status(status)
	if resp.Value.Content.Get("text/event-stream") == nil && !strings.Contains(op.Description, "text/event-stream") {
		return fmt.Errorf("%s: an event stream is not documented here", endpoint)
	}
	js := resp.Value.Content.Get("application/json")
	if js == nil || js.Schema == nil {
		return fmt.Errorf("%s: no JSON answer to check the events against", endpoint)
	}
	var errs []error
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		n++
		var val any
		if err := json.Unmarshal([]byte(data), &val); err != nil {
			errs = append(errs, fmt.Errorf("%s: event %d is not JSON: %w", endpoint, n, err))
			continue
		}
		if err := js.Schema.Value.VisitJSON(val, d.SchemaOptions()...); err != nil {
			errs = append(errs, fmt.Errorf("%s: event %d: %w", endpoint, n, err))
		}
	}
	if n == 0 {
		errs = append(errs, fmt.Errorf("%s: an event stream without events", endpoint))
	}
	return errors.Join(errs...)
}

func (d *Document) checkEnvelope(endpoint string, status int, header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%s: undocumented status %d with Content-Type %q (want the JSON envelope)", endpoint, status, ct)
	}
	var val any
	if err := json.Unmarshal(body, &val); err != nil {
		return fmt.Errorf("%s: %d body is not JSON: %w", endpoint, status, err)
	}
	schema := d.T.Components.Schemas["Response"].Value
	if err := schema.VisitJSON(val, d.SchemaOptions()...); err != nil {
		return fmt.Errorf("%s: %d body is not the envelope: %w", endpoint, status, err)
	}
	if m, ok := val.(map[string]any); !ok || m["success"] != false {
		return fmt.Errorf("%s: %d body does not say success:false: %s", endpoint, status, body)
	}
	return nil
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
