//go:build !linux

package isolation

import (
	"context"
	"errors"
)

// GvisorSummary: gVisor runs on Linux only.
func GvisorSummary(context.Context) (string, error) {
	return "", errors.New("gVisor runs on Linux only")
}
