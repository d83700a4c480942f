package aioserver

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	aio "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

const okMessage = "Operation successful"

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ok answers 200 with the envelope around data.
func ok(w http.ResponseWriter, data any) {
	msg := okMessage
	writeJSON(w, http.StatusOK, aio.Envelope[any]{Success: true, Message: &msg, Data: data})
}

// envelopeError answers status with a success:false envelope.
func envelopeError(w http.ResponseWriter, status int, msg string, data any, hint string) {
	env := aio.Envelope[any]{Message: &msg, Data: data}
	if hint != "" {
		env.Hint = &hint
	}
	writeJSON(w, status, env)
}

// fail answers a request error (422 in FastAPI's shape) or a Handle error.
func (s *Server) fail(w http.ResponseWriter, err error) {
	var re *requestError
	if errors.As(err, &re) {
		if re.status == http.StatusUnprocessableEntity {
			writeJSON(w, re.status, aio.HTTPValidationError{Detail: re.detail})
			return
		}
		envelopeError(w, re.status, re.msg, nil, "")
		return
	}
	envelopeError(w, statusOf(err), err.Error(), nil, "")
}

// failFile answers a file operation's error. Expected file-system
// failures (missing file, permission, escape, bad argument, I/O) are HTTP
// 200 with success:false and a FileOperationError as data, as the AIO
// documentation says: the SDKs then return the error as data instead of
// raising. A sandbox that is closed or cannot do the operation keeps its
// HTTP status (503, 501); so does /v1/file/download (see failDownload).
func (s *Server) failFile(w http.ResponseWriter, op, p string, err error) {
	var re *requestError
	if errors.As(err, &re) {
		s.fail(w, err)
		return
	}
	status := statusOf(err)
	if status != http.StatusServiceUnavailable && status != http.StatusNotImplemented {
		status = http.StatusOK
	}
	envelopeError(w, status, err.Error(), fileError(op, p, err), "")
}

// failDownload answers a download's error with its HTTP status: the
// download answers a byte stream, so its errors are HTTP errors.
func (s *Server) failDownload(w http.ResponseWriter, p string, err error) {
	var re *requestError
	if errors.As(err, &re) {
		s.fail(w, err)
		return
	}
	envelopeError(w, statusOf(err), err.Error(), fileError("download", p, err), "")
}

// fileFailed answers 200 with success:false and fe as data.
func fileFailed(w http.ResponseWriter, fe aio.FileOperationError, hint string) {
	envelopeError(w, http.StatusOK, fe.Message, fe, hint)
}

func fileError(op, p string, err error) aio.FileOperationError {
	fe := aio.FileOperationError{Path: p, Operation: op, Message: err.Error(), ErrorType: errorType(err)}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		n, name := int(errno), errnoName(errno)
		fe.Errno, fe.ErrnoName = &n, &name
	}
	return fe
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, driver.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, driver.ErrClosed), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EINVAL):
		return http.StatusBadRequest
	}
	var ae *argError
	if errors.As(err, &ae) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func errorType(err error) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return aio.ErrTypePermission
	case errors.Is(err, fs.ErrNotExist):
		return aio.ErrTypeNotFound
	case errors.Is(err, syscall.EISDIR):
		return aio.ErrTypeIsDirectory
	case errors.Is(err, syscall.ENOTDIR):
		return aio.ErrTypeNotDirectory
	}
	var ae *argError
	if errors.As(err, &ae) {
		return aio.ErrTypeInvalid
	}
	return aio.ErrTypeIO
}

// errnoName is e's C name ("ENOENT"), "E?" for one without a name.
func errnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return "E?"
}

// argError is a semantically bad argument (400).
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func badArg(msg string) error { return &argError{msg: msg} }
