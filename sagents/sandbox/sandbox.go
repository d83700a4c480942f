package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Sandbox is one sandbox, as *sql.DB is one database: a concrete type over
// the [Driver] of its mode. It owns what every mode shares: the closed
// state, default timeouts and output limits, events to the observability
// Manager, counters, and the answer [ErrUnsupported] for a capability the
// driver lacks. Paths given to its methods are sandbox (virtual) paths;
// relative paths start at the workspace. Methods are safe for concurrent
// use.
type Sandbox struct {
	mode    Type
	drv     driver.Driver
	timeout time.Duration
	obs     *observability.Manager
	// isolation and network are the driver's IsolationReporter answer,
	// put on every event.
	isolation, network string
	cfg                Config // what Fork opens its sandbox with
	// bgStarts remembers when each background task started under an
	// observer (task id -> time.Time), so that its end is reported as one
	// event covering the command (ops_background.go).
	bgStarts sync.Map
	bgCount  atomic.Int64
	// procs take part in checkpoints (checkpoint.go).
	procs procHooks

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	stats struct{ ops, errors, commands, timeouts atomic.Int64 }
}

// New validates cfg and opens a Sandbox with the driver registered for
// cfg.Mode. An unregistered mode is an error listing the known ones.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f, err := driver.Lookup(cfg.Mode)
	if err != nil {
		return nil, err
	}
	ctx = cfg.Observer.SandboxStart(ctx, observability.SandboxOp{Op: "acquire", Mode: string(cfg.Mode), SandboxID: cfg.SandboxID})
	d, err := f(ctx, cfg)
	if err == nil && d == nil {
		err = fmt.Errorf("sandbox: the %s provider returned no driver", cfg.Mode)
	}
	if err != nil {
		cfg.Observer.SandboxError(ctx, err)
		return nil, err
	}
	cfg.Observer.SandboxEnd(ctx, observability.SandboxResult{})
	return NewFromDriver(cfg, d), nil
}

// NewFromDriver wraps a driver opened by other means (a provider that
// hands out sandboxes it holds). It uses cfg's Mode, Timeout and Observer.
func NewFromDriver(cfg Config, d driver.Driver) *Sandbox {
	s := &Sandbox{mode: cfg.Mode, drv: d, timeout: cfg.Timeout, obs: cfg.Observer, cfg: cfg}
	if r, ok := d.(driver.IsolationReporter); ok {
		kind, network := r.Isolation()
		s.isolation, s.network = kind, string(network)
	}
	return s
}

// Driver returns the driver behind s, for its mode-specific methods (as
// sql.Conn.Raw gives the driver connection).
func (s *Sandbox) Driver() driver.Driver { return s.drv }

// Type is the sandbox mode.
func (s *Sandbox) Type() Type { return s.mode }

// ID identifies the sandbox.
func (s *Sandbox) ID() string { return s.drv.ID() }

// WorkspacePath is the workspace as commands inside see it.
func (s *Sandbox) WorkspacePath() string { return s.drv.WorkspacePath() }

// HostWorkspacePath is the workspace on the host, or "" when it has no host
// directory (remote sandboxes).
func (s *Sandbox) HostWorkspacePath() string {
	if h, ok := s.drv.(driver.HostPather); ok {
		return h.HostWorkspacePath()
	}
	return ""
}

// VolumeMounts lists the extra mounts.
func (s *Sandbox) VolumeMounts() []VolumeMount {
	if m, ok := s.drv.(driver.Mounter); ok {
		return m.VolumeMounts()
	}
	return nil
}

// Stats counts what a Sandbox did.
type Stats struct {
	Operations int64 // every call that reached the driver
	Errors     int64 // calls that returned an error (a missing file included)
	Commands   int64 // commands, Python and JavaScript runs
	TimedOut   int64 // commands that hit their timeout
}

// Stats returns the counters so far.
func (s *Sandbox) Stats() Stats {
	return Stats{Operations: s.stats.ops.Load(), Errors: s.stats.errors.Load(),
		Commands: s.stats.commands.Load(), TimedOut: s.stats.timeouts.Load()}
}

// Close stops background tasks and releases resources. It is idempotent;
// every later call of another method returns ErrClosed.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		ctx := s.obs.SandboxStart(ctx, s.op("release", "", ""))
		s.closeErr = s.drv.Close(ctx)
		s.end(ctx, nil, s.closeErr)
	})
	return s.closeErr
}

// checkOpen is the one closed-state check of every mode.
func (s *Sandbox) checkOpen() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (s *Sandbox) op(name, path, task string) observability.SandboxOp {
	return observability.SandboxOp{Op: name, Mode: string(s.mode), SandboxID: s.drv.ID(), Path: path, TaskID: task,
		Isolation: s.isolation, Network: s.network}
}

// begin checks the closed state and starts the operation's event.
func (s *Sandbox) begin(ctx context.Context, name, path, task string) (context.Context, error) {
	if err := s.checkOpen(); err != nil {
		return ctx, err
	}
	s.stats.ops.Add(1)
	return s.obs.SandboxStart(ctx, s.op(name, path, task)), nil
}

// end finishes the operation's event; res describes a command's end.
func (s *Sandbox) end(ctx context.Context, res *CommandResult, err error) {
	if err != nil {
		s.stats.errors.Add(1)
		if errors.Is(err, fs.ErrNotExist) {
			s.obs.SandboxEnd(ctx, observability.SandboxResult{NotFound: true})
			return
		}
		s.obs.SandboxError(ctx, err)
		return
	}
	var r observability.SandboxResult
	if res != nil {
		s.stats.commands.Add(1)
		if res.TimedOut {
			s.stats.timeouts.Add(1)
		}
		r = observability.SandboxResult{Command: true, ExitCode: res.ExitCode, TimedOut: res.TimedOut}
		if res.SessionRestarted {
			// The mode's session sandbox started again for this command
			// (idle, dead, or a bind it needed): an event under the
			// command's.
			rctx := s.obs.SandboxStart(ctx, s.op("session_restart", "", ""))
			s.obs.SandboxEnd(rctx, observability.SandboxResult{})
		}
	}
	s.obs.SandboxEnd(ctx, r)
}

// unsupported is the one place a missing capability is reported.
func (s *Sandbox) unsupported(what string) error {
	return fmt.Errorf("sandbox: %s in %s mode: %w", what, s.mode, ErrUnsupported)
}

// execOptions fills in the defaults every mode shares.
func (s *Sandbox) execOptions(o ExecOptions) ExecOptions {
	if o.Timeout == 0 {
		o.Timeout = driver.CommandTimeout(0, s.timeout)
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}
	return o
}
