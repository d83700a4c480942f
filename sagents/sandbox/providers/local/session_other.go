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

func (s *Sandbox) prestartSession() {}

func (s *Sandbox) runInv(ctx context.Context, inv invocation, opts sandbox.ExecOptions) (*sandbox.CommandResult, error) {
	if s.sess.opts.Enabled {
		return s.sessionRun(ctx, inv, opts)
	}
	return s.run(ctx, inv, opts)
}

func (s *Sandbox) sessionBackground(context.Context, invocation) (*sandbox.BackgroundTask, error) {
	return nil, fmt.Errorf("%w: the session sandbox needs Linux (bubblewrap)", sandbox.ErrIsolationUnavailable)
}

// SessionPID is 0: there is no session sandbox on this OS.
func (s *Sandbox) SessionPID() int { return 0 }
