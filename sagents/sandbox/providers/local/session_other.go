//go:build !linux

package local

import (
	"context"
	"fmt"

	"github.com/sage-go/sage/sagents/sandbox"
)

type liveSession struct{}

func (l *liveSession) stop() {}

func (s *Sandbox) sessionRun(context.Context, invocation, sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	return nil, fmt.Errorf("%w: the session sandbox needs Linux (bubblewrap)", sandbox.ErrIsolationUnavailable)
}

func (s *Sandbox) stopSession() {}

// SessionPID is 0: there is no session sandbox on this OS.
func (s *Sandbox) SessionPID() int { return 0 }
