package local

import (
	"github.com/sage-go/sage/sagents/sandbox"
	"sync"
	"time"
)

// SessionOptions turn on the session sandbox (see doc.go, "Session
// sandbox"): one long-lived sandbox per Sandbox whose supervisor forks
// every shell command inside it, so /tmp, processes and localhost persist
// from one command to the next.
type SessionOptions struct {
	// Enabled runs commands, background tasks and Python and JavaScript
	// calls through the session sandbox. False leaves the choice to the
	// config (sandbox.local.fresh_per_command; unset: a session sandbox
	// where bwrap or gVisor isolates, else a fresh sandbox per command).
	Enabled bool
	// IdleTimeout stops the session sandbox after this long without a
	// command; the next command starts a new one. 0 means
	// DefaultIdleTimeout; negative means never.
	IdleTimeout time.Duration
	// Prestart starts the session sandbox in the background as soon as
	// the Sandbox opens, so that its first command finds it running
	// instead of paying its start (bwrap, mounts, the supervisor); a
	// command issued earlier waits for it. A start that fails is retried
	// by the first command, which reports the error.
	Prestart bool
}

// DefaultIdleTimeout is how long an idle session sandbox lives.
const DefaultIdleTimeout = 15 * time.Minute

// sessionSlot holds a Sandbox's session sandbox, started on first use.
type sessionSlot struct {
	opts     SessionOptions
	mu       sync.Mutex
	live     *liveSession // nil: none running
	started  int          // session sandboxes started so far
	closed   bool
	extra    []bind // binds calls needed, kept for the next session sandbox
	idleStop *time.Timer
}

func (o SessionOptions) idle() time.Duration {
	switch {
	case o.IdleTimeout == 0:
		return DefaultIdleTimeout
	case o.IdleTimeout < 0:
		return 0
	}
	return o.IdleTimeout
}

// sessionByConfig says whether cfg asks for the session sandbox: it is
// the default wherever it can run (bwrap or gVisor on Linux); fresh_per_command
// true turns it off, false asks for it and is refused where it cannot run.
func sessionByConfig(cfg sandbox.Config) bool {
	if f := cfg.Local.FreshPerCommand; f != nil {
		return !*f
	}
	return usesBwrap(cfg)
}

// checkSession refuses what the session sandbox cannot honour yet.
func checkSession(cfg sandbox.Config, o SessionOptions) error {
	if !o.Enabled {
		return nil
	}
	if !usesBwrap(cfg) {
		return &sandbox.ConfigError{Field: "sandbox.local.isolation", Value: string(cfg.Local.Isolation.Linux),
			Reason: "the session sandbox needs bwrap or gvisor isolation on Linux; fix: use isolation auto/bwrap/gvisor or fresh_per_command"}
	}
	return nil
}

// SessionEnabled reports whether this sandbox runs its commands in a
// session sandbox.
func (s *Sandbox) SessionEnabled() bool { return s.sess.opts.Enabled }
