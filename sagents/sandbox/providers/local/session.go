package local

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
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
	// Supervisor is the program the session sandbox runs as its init, the
	// supervisor that forks every command: an absolute path to a
	// sage-supervisor (cmd/sage-supervisor; make build puts it next to
	// bin/sage), or SupervisorSelf to re-execute this program as it. Empty
	// means a sage-supervisor next to this program's executable when
	// there is one, else SupervisorSelf. The separate program starts in a
	// fraction of the time: it links the supervisor alone. A program
	// whose first answer does not carry this build's protocol version is
	// refused: named here, the session fails with an error naming it;
	// found next to the executable, this program serves instead (logged
	// once). Either way it is bound read-only into the sandbox as this
	// program would be.
	Supervisor string
}

// sessionTaskReserve is how many tasks (threads) a bwrap session
// sandbox's supervisor may have beyond the pids limit of its commands:
// its RLIMIT_NPROC and the sandbox's pids cgroup are that much above the
// limit, and each command gets the limit itself (supervisor --nproc). The
// supervisor makes a thread for each command's Landlock domain, and the Go
// runtime dies when it cannot make one: a fork bomb left by one command
// must not take the supervisor down with it.
// A red-team test's control sets it to 0.
var sessionTaskReserve = 64

// SupervisorSelf as SessionOptions.Supervisor re-executes the linking
// program as the supervisor.
const SupervisorSelf = "self"

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
	// restartUnreported: a host file operation (checkpoints on) restarted
	// the session sandbox; the next command says so (SessionRestarted).
	restartUnreported bool
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
func sessionByConfig(cfg driver.Config) bool {
	if f := cfg.Local.FreshPerCommand; f != nil {
		return !*f
	}
	return usesBwrap(cfg)
}

// checkSession refuses what the session sandbox cannot honour yet.
func checkSession(cfg driver.Config, o SessionOptions) error {
	if !o.Enabled {
		return nil
	}
	if p := o.Supervisor; p != "" && p != SupervisorSelf && !filepath.IsAbs(p) {
		return fmt.Errorf("local: SessionOptions.Supervisor %q: want an absolute path to a sage-supervisor program, %q or empty", p, SupervisorSelf)
	}
	if !usesBwrap(cfg) {
		return &driver.ConfigError{Field: "sandbox.local.isolation", Value: string(cfg.Local.Isolation.Linux),
			Reason: "the session sandbox needs bwrap or gvisor isolation on Linux; fix: use isolation auto/bwrap/gvisor or fresh_per_command"}
	}
	return nil
}

// SessionEnabled reports whether this sandbox runs its commands in a
// session sandbox.
func (s *Sandbox) SessionEnabled() bool { return s.sess.opts.Enabled }
