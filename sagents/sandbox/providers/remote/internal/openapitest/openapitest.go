package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Doc is one loaded OpenAPI document.
type Doc struct {
	// Name names the document in errors (a file name).
	Name string
	// T is the document itself, for what only one API has (a schema of
	// its components, its paths).
	T      *openapi3.T
	router routers.Router
}

// Load reads a document from data; name names it in errors.
func Load(name string, data []byte) (*Doc, error) {
	t, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return prepare(name, t)
}

// LoadFile reads a document from the file at path.
func LoadFile(path string) (*Doc, error) {
	t, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return prepare(path, t)
}

// prepare validates the document itself and builds its router; servers
// are dropped so requests to any host match.
func prepare(name string, t *openapi3.T) (*Doc, error) {
	if err := t.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s: document invalid: %w", name, err)
	}
	t.Servers = nil
	r, err := legacy.NewRouter(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Doc{Name: name, T: t, router: r}, nil
}

// Is31 reports whether the document is OpenAPI 3.1, whose schemas are
// JSON Schema 2020-12 (type "null", type arrays) rather than 3.0's
// ("nullable").
func (d *Doc) Is31() bool { return strings.HasPrefix(d.T.OpenAPI, "3.1") }

// SchemaOptions are the options to validate a value against one of the
// document's schemas (JSON Schema 2020-12 for a 3.1 document), every
// error reported.
func (d *Doc) SchemaOptions() []openapi3.SchemaValidationOption {
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors()}
	if d.Is31() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	return opts
}

// options: every error, no authentication check, an undocumented status
// is a mismatch, and 3.1 schemas as JSON Schema 2020-12.
func (d *Doc) options() *openapi3filter.Options {
	o := &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	if d.Is31() {
		o.SchemaValidationOptions = []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020()}
	}
	return o
}

// Operations lists the document's operations as "METHOD /path", sorted.
func (d *Doc) Operations() []string {
	var ops []string
	for path, item := range d.T.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	return ops
}

// Route finds the operation of req.
func (d *Doc) Route(req *http.Request) (*routers.Route, map[string]string, error) {
	route, params, err := d.router.FindRoute(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: not an operation of %s: %w", req.Method, req.URL.Path, d.Name, err)
	}
	return route, params, nil
}

// CheckRequest validates req, whose body is body (req's own body is not
// read), and returns what CheckResponse needs to validate its answer. It
// returns a nil input only when req matches no operation; with an input
// and an error, the request matched an operation but not its schema.
func (d *Doc) CheckRequest(req *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	c := WithBody(req, body)
	route, params, err := d.Route(c)
	if err != nil {
		return nil, err
	}
	in := &openapi3filter.RequestValidationInput{Request: c, PathParams: params, Route: route, Options: d.options()}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return in, fmt.Errorf("request %s %s: %w", req.Method, req.URL.Path, err)
	}
	return in, nil
}

// CheckResponse validates the answer (status, header, body) to a request
// CheckRequest matched.
func (d *Doc) CheckResponse(in *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte) error {
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: in.Options}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("answer %d to %s %s: %w", status, in.Request.Method, in.Request.URL.Path, err)
	}
	return nil
}

// WithBody returns a copy of req whose body reads body. kin-openapi reads
// the body through GetBody when it is set, so that is set too.
func WithBody(req *http.Request, body []byte) *http.Request {
	c := req.Clone(context.Background())
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return c
}
