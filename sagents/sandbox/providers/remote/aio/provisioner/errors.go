package provisioner

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// ErrNotFound is what a 404 answer matches (errors.Is); it wraps
// fs.ErrNotExist.
var ErrNotFound = fmt.Errorf("provisioner: sandbox not found: %w", fs.ErrNotExist)

// ErrInvalid marks a request the server refuses as malformed (400); it
// wraps fs.ErrInvalid. Backends may wrap it too.
var ErrInvalid = fmt.Errorf("provisioner: invalid request: %w", fs.ErrInvalid)

// APIError is a non-2xx answer from the provisioner.
type APIError struct {
	Status   int    // HTTP status
	Endpoint string // method and path, e.g. "GET /api/sandboxes/abc"
	Message  string // the answer's detail, or its body, or the status text
	Code     string // the answer's error code, when it sent one
}

func (e *APIError) Error() string {
	return fmt.Sprintf("provisioner: %s: HTTP %d: %s", e.Endpoint, e.Status, e.Message)
}

// Is makes a 404 match ErrNotFound and fs.ErrNotExist, 401 and 403
// fs.ErrPermission, 400 ErrInvalid and fs.ErrInvalid, a 409 stale_fence
// orchestrator.ErrStaleFence and ErrLockLost.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound, fs.ErrNotExist:
		return e.Status == http.StatusNotFound
	case fs.ErrPermission:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrInvalid, fs.ErrInvalid:
		return e.Status == http.StatusBadRequest
	case orchestrator.ErrStaleFence, orchestrator.ErrLockLost:
		return e.Status == http.StatusConflict && e.Code == codeStaleFence
	}
	return false
}

// codeStaleFence is the error code of a 409 for a call under an older
// fencing token than the sandbox's (orchestrator.ErrStaleFence).
const codeStaleFence = "stale_fence"

// isNotFound reports whether err is a 404 from the provisioner.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
