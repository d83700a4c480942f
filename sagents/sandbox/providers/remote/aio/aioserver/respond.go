package aioserver

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
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

// failFile answers a file operation's error with a FileOperationError.
func (s *Server) failFile(w http.ResponseWriter, op, p string, err error) {
	var re *requestError
	if errors.As(err, &re) {
		s.fail(w, err)
		return
	}
	fe := aio.FileOperationError{Path: p, Operation: op, Message: err.Error(), ErrorType: errorType(err)}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		n, name := int(errno), errnoName(errno)
		fe.Errno, fe.ErrnoName = &n, &name
	}
	envelopeError(w, statusOf(err), err.Error(), fe, "")
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, sandbox.ErrClosed), errors.Is(err, context.Canceled):
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

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EISDIR:
		return "EISDIR"
	case syscall.ENOTDIR:
		return "ENOTDIR"
	case syscall.EEXIST:
		return "EEXIST"
	case syscall.ENOSPC:
		return "ENOSPC"
	}
	return "E?"
}

// argError is a semantically bad argument (400).
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func badArg(msg string) error { return &argError{msg: msg} }
