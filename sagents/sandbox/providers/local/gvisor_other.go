//go:build !linux

package local

import (
	"context"
	"errors"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
)

// GvisorSummary: gVisor runs on Linux only.
func GvisorSummary(context.Context) (string, error) {
	return "", errors.New("gVisor runs on Linux only")
}

// newGvisor: gVisor runs on Linux only (backend.go asks for it there
// alone).
func newGvisor(context.Context, isolation.Options) (isolation.Backend, error) {
	return nil, errors.New("gVisor runs on Linux only")
}
