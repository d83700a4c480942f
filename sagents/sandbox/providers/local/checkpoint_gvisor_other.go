//go:build !linux

package local

import (
	"context"
	"errors"
)

// GvisorCheckpointsSummary: gVisor runs on Linux only.
func GvisorCheckpointsSummary(context.Context) (string, error) {
	return "", errors.New("gVisor runs on Linux only")
}
