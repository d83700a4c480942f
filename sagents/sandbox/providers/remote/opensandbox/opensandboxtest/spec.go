package opensandboxtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/sage-go/sage/api"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/internal/openapitest"
)

// maxChecked bounds the bodies the validator keeps: an exchange larger
// than this is reported rather than checked.
const maxChecked = 16 << 20

// Spec is the project's own OpenAPI document of the OpenSandbox subset
// the provider uses (api/opensandbox-subset.openapi.yaml).
type Spec struct {
	*openapitest.Doc
	event   *openapi3.Schema
	failure *openapi3.Schema

	mu   sync.Mutex
	seen map[string]bool
}

func (s *Spec) mark(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[op] = true
}

// Unchecked lists, sorted, the operations of the document that no fake in
// this process has validated an exchange of yet.
func (s *Spec) Unchecked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, item := range s.T.Paths.Map() {
		for _, op := range item.Operations() {
			if !s.seen[op.OperationID] {
				out = append(out, op.OperationID)
			}
		}
	}
	sort.Strings(out)
	return out
}

var (
	specOnce sync.Once
	spec     *Spec
	specErr  error
)

// LoadSpec loads and checks the embedded document once.
func LoadSpec() (*Spec, error) {
	specOnce.Do(func() {
		d, err := openapitest.Load("api/opensandbox-subset.openapi.yaml", api.OpenSandboxSubset)
		if err != nil {
			specErr = err
			return
		}
		spec = &Spec{Doc: d, event: d.T.Components.Schemas["StreamEvent"].Value,
			failure: d.T.Components.Responses["Failure"].Value.Content.Get("application/json").Schema.Value, seen: map[string]bool{}}
	})
	return spec, specErr
}

// CheckResponse validates the answer to a request CheckRequest accepted.
// An event stream must be declared for the operation and each of its data
// lines must be a StreamEvent.
func (s *Spec) CheckResponse(in *openapi3filter.RequestValidationInput, status int, h http.Header, body []byte) error {
	if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); mt == "text/event-stream" {
		what := fmt.Sprintf("answer %d to %s %s", status, in.Request.Method, in.Request.URL.Path)
		resp := in.Route.Operation.Responses.Status(status)
		if resp == nil || resp.Value.Content.Get(mt) == nil {
			return fmt.Errorf("%s: an event stream is not documented here", what)
		}
		return s.checkEvents(what, body)
	}
	return s.Doc.CheckResponse(in, status, h, body)
}

func (s *Spec) checkEvents(what string, body []byte) error {
	var errs []error
	for _, line := range strings.Split(string(body), "\n") {
		if err := s.checkEventLine(what, line); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkEventLine validates one line of an event stream: a bare JSON line
// (execd's form) or a data line must hold one StreamEvent, or execd's
// error object for a failure after the stream began.
func (s *Spec) checkEventLine(what, line string) error {
	data, ok := strings.CutPrefix(line, "data:")
	if !ok && !strings.HasPrefix(line, "{") {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &v); err != nil {
		return fmt.Errorf("%s: event data is not JSON: %w", what, err)
	}
	if m, isObj := v.(map[string]any); isObj && m["type"] == nil && m["code"] != nil {
		if err := s.failure.VisitJSON(v, s.SchemaOptions()...); err != nil {
			return fmt.Errorf("%s: error object %s: %w", what, data, err)
		}
		return nil
	}
	if err := s.event.VisitJSON(v, s.SchemaOptions()...); err != nil {
		return fmt.Errorf("%s: event %s: %w", what, data, err)
	}
	return nil
}

// validated serves h and reports every exchange that does not match the
// subset document.
func validated(h http.Handler, report func(string)) http.Handler {
	sp, err := LoadSpec()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err != nil {
			report(err.Error())
			h.ServeHTTP(w, r)
			return
		}
		body, rerr := io.ReadAll(io.LimitReader(r.Body, maxChecked+1))
		r.Body.Close()
		if rerr != nil || len(body) > maxChecked {
			report(fmt.Sprintf("%s %s: body unreadable or over %d bytes (%v)", r.Method, r.URL.Path, maxChecked, rerr))
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		in, verr := sp.CheckRequest(r, body)
		if verr != nil {
			report(verr.Error())
		}
		if in != nil {
			sp.mark(in.Route.Operation.OperationID)
		}
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		if in != nil {
			what := fmt.Sprintf("answer to %s %s", r.Method, r.URL.Path)
			rec.line = func(l string) {
				if err := sp.checkEventLine(what, l); err != nil {
					report(err.Error())
				}
			}
		}
		h.ServeHTTP(rec, r)
		rec.endStream()
		switch {
		case in == nil:
		case rec.over:
			report(fmt.Sprintf("answer to %s %s: over %d bytes, not checked", r.Method, r.URL.Path, maxChecked))
		default:
			if err := sp.CheckResponse(in, rec.status, w.Header(), rec.body.Bytes()); err != nil {
				report(err.Error())
			}
		}
	})
}

// recorder keeps a copy of what a handler answers; it flushes, so event
// streams still reach the client as they are written. An event stream is
// checked line by line as it is written (line) and only its content type
// and status are left for CheckResponse, since a stream may be long.
type recorder struct {
	http.ResponseWriter
	status  int
	body    bytes.Buffer
	over    bool
	line    func(string)
	stream  bool
	partial []byte
	decided bool
}

func (r *recorder) decide() {
	if !r.decided {
		r.decided = true
		mt, _, _ := mime.ParseMediaType(r.Header().Get("Content-Type"))
		r.stream = mt == "text/event-stream" && r.line != nil
	}
}

func (r *recorder) WriteHeader(code int) {
	r.decide()
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.decide()
	switch {
	case r.stream:
		r.partial = append(r.partial, b...)
		for {
			i := bytes.IndexByte(r.partial, '\n')
			if i < 0 {
				break
			}
			r.line(string(r.partial[:i]))
			r.partial = r.partial[i+1:]
		}
		if len(r.partial) > maxChecked {
			r.over, r.partial = true, nil
		}
	case r.body.Len()+len(b) > maxChecked:
		r.over = true
	default:
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// endStream checks a last event line that lacked its newline.
func (r *recorder) endStream() {
	if r.stream && len(r.partial) > 0 {
		r.line(string(r.partial))
	}
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
