package aioserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// requestError is a request the server refuses before doing anything.
type requestError struct {
	status int
	detail []aio.ValidationError // for 422
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func invalid(loc []any, typ, msg string) *requestError {
	return &requestError{status: http.StatusUnprocessableEntity, msg: msg,
		detail: []aio.ValidationError{{Loc: loc, Msg: msg, Type: typ}}}
}

// readBody reads the request body under the size limit and the body
// deadline.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.opts.MaxBodyBytes {
		return nil, tooLarge(s.opts.MaxBodyBytes)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		// The deadline stays: net/http would otherwise wait for the rest
		// of the body before answering. The connection is not reused.
		w.Header().Set("Connection", "close")
	} else {
		_ = rc.SetReadDeadline(time.Time{})
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(s.opts.MaxBodyBytes)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &requestError{status: http.StatusRequestTimeout, msg: "request body not received in time"}
	case err != nil:
		return nil, &requestError{status: http.StatusBadRequest, msg: "read request body: " + err.Error()}
	}
	return body, nil
}

func jsonContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func tooLarge(limit int64) *requestError {
	return &requestError{status: http.StatusRequestEntityTooLarge,
		msg: fmt.Sprintf("request body is larger than %d bytes", limit)}
}

// DecodeJSON decodes body into dst the way FastAPI validates: the body
// must be a JSON object, the required fields present and not null, and
// every field of the right type. Errors are 422 *requestError values.
func DecodeJSON(body []byte, dst any, required ...string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) || bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
			return invalid([]any{"body"}, "model_attributes_type", "Input should be a valid dictionary or object")
		}
		return invalid([]any{"body"}, "json_invalid", "JSON decode error: "+err.Error())
	}
	if fields == nil {
		return invalid([]any{"body"}, "model_attributes_type", "Input should be a valid dictionary or object")
	}
	for _, f := range required {
		if v, ok := fields[f]; !ok || string(v) == "null" {
			return invalid([]any{"body", f}, "missing", "Field required")
		}
	}
	if err := json.Unmarshal(body, dst); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return invalid([]any{"body", ute.Field}, "type_error", fmt.Sprintf("Input should be a valid %s", ute.Type))
		}
		return invalid([]any{"body"}, "value_error", err.Error())
	}
	return nil
}

// decode reads and decodes a JSON request; on failure it has answered.
// Only an application/json body is read: a browser can send text/plain or
// a form to any site without asking first, never JSON.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, dst any, required ...string) bool {
	if !jsonContentType(r.Header.Get("Content-Type")) {
		w.Header().Set("Connection", "close")
		envelopeError(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q: this endpoint takes application/json", r.Header.Get("Content-Type")), nil, "")
		return false
	}
	body, err := s.readBody(w, r)
	if err == nil {
		err = DecodeJSON(body, dst, required...)
	}
	if err != nil {
		s.fail(w, err)
		return false
	}
	return true
}
