package aioapi

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
)

// APIError is a failed call: a non-2xx status or a success:false envelope.
// It matches fs.ErrNotExist and fs.ErrPermission (errors.Is) when the
// status, the file error type or the errno says so.
type APIError struct {
	// Status is the HTTP status (200 for a success:false envelope).
	Status int
	// Endpoint is the method and path called, e.g. "POST /v1/file/read".
	Endpoint string
	Message  string
	Hint     string
	// File is the structured file error, when the server sent one.
	File *FileOperationError
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "aio: %s: ", e.Endpoint)
	if e.Status != http.StatusOK {
		fmt.Fprintf(&b, "HTTP %d: ", e.Status)
	}
	b.WriteString(e.Message)
	if e.Hint != "" {
		b.WriteString(" (hint: " + e.Hint + ")")
	}
	return b.String()
}

// Is maps the error onto fs.ErrNotExist and fs.ErrPermission.
func (e *APIError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Status == http.StatusNotFound || e.fileKind(ErrTypeNotFound, "ENOENT")
	case fs.ErrPermission:
		return e.Status == http.StatusForbidden || e.fileKind(ErrTypePermission, "EACCES", "EPERM")
	}
	return false
}

func (e *APIError) fileKind(errType string, errnos ...string) bool {
	if e.File == nil {
		return false
	}
	if e.File.ErrorType == errType {
		return true
	}
	for _, n := range errnos {
		if e.File.ErrnoName != nil && *e.File.ErrnoName == n {
			return true
		}
	}
	return false
}

// errorBody is every error shape the API uses: the envelope (data may
// hold a FileOperationError) and FastAPI's {detail} (a string or a list).
type errorBody struct {
	Success *bool           `json:"success"`
	Message *string         `json:"message"`
	Hint    *string         `json:"hint"`
	Data    json.RawMessage `json:"data"`
	Detail  json.RawMessage `json:"detail"`
}

// newAPIError builds an APIError from a status and a body of any shape.
func newAPIError(status int, endpoint string, body []byte) *APIError {
	e := &APIError{Status: status, Endpoint: endpoint}
	var eb errorBody
	if json.Unmarshal(body, &eb) != nil {
		e.Message = strings.TrimSpace(string(truncate(body, 512)))
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
		return e
	}
	if eb.Message != nil {
		e.Message = *eb.Message
	}
	if eb.Hint != nil {
		e.Hint = *eb.Hint
	}
	var fe FileOperationError
	if len(eb.Data) > 0 && json.Unmarshal(eb.Data, &fe) == nil && fe.ErrorType != "" {
		e.File = &fe
		if e.Message == "" {
			e.Message = fe.Message
		}
	}
	if d := detailText(eb.Detail); d != "" && e.Message == "" {
		e.Message = d
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// detailText renders FastAPI's detail: a string or a list of
// ValidationError.
func detailText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []ValidationError
	if json.Unmarshal(raw, &list) != nil {
		return string(truncate(raw, 512))
	}
	parts := make([]string, 0, len(list))
	for _, v := range list {
		loc := make([]string, 0, len(v.Loc))
		for _, l := range v.Loc {
			loc = append(loc, fmt.Sprint(l))
		}
		parts = append(parts, strings.Join(loc, ".")+": "+v.Msg)
	}
	return "validation failed: " + strings.Join(parts, "; ")
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
