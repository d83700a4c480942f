//go:build !linux

package local

import (
	"context"
	"fmt"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

type liveSession struct{}

func (l *liveSession) stop() {}

func (s *Sandbox) sessionRun(context.Context, invocation, driver.ExecOptions) (*driver.CommandResult, error) {
	return nil, fmt.Errorf("%w: the session sandbox needs Linux (bubblewrap)", driver.ErrIsolationUnavailable)
}

func (s *Sandbox) stopSession() {}

func (s *Sandbox) prestartSession() {}

func (s *Sandbox) runInv(ctx context.Context, inv invocation, opts driver.ExecOptions) (*driver.CommandResult, error) {
	if s.sess.opts.Enabled {
		return s.sessionRun(ctx, inv, opts)
	}
	return s.run(ctx, inv, opts)
}

func (s *Sandbox) sessionBackground(context.Context, invocation) (*driver.BackgroundTask, error) {
	return nil, fmt.Errorf("%w: the session sandbox needs Linux (bubblewrap)", driver.ErrIsolationUnavailable)
}

// SessionPID is 0: there is no session sandbox on this OS.
func (s *Sandbox) SessionPID() int { return 0 }
