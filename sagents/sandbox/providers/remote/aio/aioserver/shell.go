package aioserver

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Shell is the shell of one session: it keeps state (the working
// directory and the exported environment) from one command to the next,
// as AIO's long-lived session shells do. After Exec("cd /tmp && export
// X=1"), the next Exec runs in /tmp with X set.
//
// Exec runs command to completion. With merge, its stderr is written to
// the same pipe as its stdout, so the output interleaves as a terminal
// shows it (CommandResult.Stdout holds it all); otherwise the streams stay
// apart. The result never carries the session's own bookkeeping.
type Shell interface {
	Exec(ctx context.Context, command string, opts driver.ExecOptions, merge bool) (*driver.CommandResult, error)
	// Dir is the working directory the next command starts in.
	Dir() string
	// Close releases the shell; the session is gone.
	Close(ctx context.Context) error
}

// ShellFactory opens the Shell of a new session whose commands start in
// dir. The default, NewLiveShell, runs one long-lived bash per session;
// NewReplayShell replays the state on each command.
type ShellFactory func(ctx context.Context, h *sandbox.Sandbox, dir string) (Shell, error)

// maxShellState bounds the state a replay shell keeps (working directory
// and exports); a larger state is not taken and the previous one stays.
const maxShellState = 256 << 10

// replayShell keeps a session's state on the server and replays it: each
// command runs in a fresh `sh -c` of the Handle that first restores the
// exports and the directory the previous command left, then runs the
// command, and on exit (an EXIT trap, so `exit 3` counts too) writes the
// new state to the original stderr after a per-call marker. What it does
// not keep: shell functions, aliases, unexported variables, background
// jobs (use /v1/bash/exec async_mode), and the state of a command killed
// by its timeout.
type replayShell struct {
	h       *sandbox.Sandbox
	mu      sync.Mutex
	dir     string // where the first command starts; a directory the Handle accepts
	cwd     string // the directory the last command left
	exports string // `export -p` of the last command
}

// NewReplayShell is a ShellFactory whose sessions replay their state
// (replayShell); NewLiveShell falls back to it.
func NewReplayShell(_ context.Context, h *sandbox.Sandbox, dir string) (Shell, error) {
	return &replayShell{h: h, dir: dir}, nil
}

func (s *replayShell) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cwd != "" {
		return s.cwd
	}
	return s.dir
}

func (s *replayShell) Close(context.Context) error { return nil }

// shQuote quotes v for the POSIX shell.
func shQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

func (s *replayShell) Exec(ctx context.Context, command string, opts driver.ExecOptions, merge bool) (*driver.CommandResult, error) {
	// One command at a time per session, as in a terminal.
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, cwd, exports := s.dir, s.cwd, s.exports
	if opts.Workdir != "" {
		// exec_dir: this command starts there, and so do the next ones.
		dir, cwd = opts.Workdir, ""
	}
	marker := "__sage_state_" + driver.NewID("m") + "__"
	var b strings.Builder
	b.WriteString("exec 3>&2\n")
	if merge {
		b.WriteString("exec 2>&1\n")
	}
	if exports != "" {
		// Read-only variables cannot be set again; their errors are noise.
		b.WriteString("{\n" + exports + "\n} 2>/dev/null\n")
	}
	for _, k := range sortedKeys(opts.Env) {
		// The request's variables win over the session's.
		b.WriteString("export " + k + "=" + shQuote(opts.Env[k]) + "\n")
	}
	if cwd != "" {
		b.WriteString("cd -- " + shQuote(cwd) + " 2>/dev/null\n")
	}
	b.WriteString(`trap '__sage_rc=$?; { printf "\n%s\n" ` + marker + `; pwd; export -p; } >&3; exit $__sage_rc' EXIT` + "\n")
	b.WriteString(command)
	b.WriteString("\n")
	opts.Workdir = dir
	res, err := s.h.ExecuteCommand(ctx, b.String(), opts)
	if err != nil {
		return nil, err
	}
	s.dir, s.cwd = dir, cwd
	stderr, state, found := cutState(res.Stderr, marker)
	res.Stderr = stderr
	if found && len(state) <= maxShellState {
		newCwd, newExports, _ := strings.Cut(state, "\n")
		if strings.HasPrefix(newCwd, "/") {
			s.cwd, s.exports = newCwd, strings.TrimRight(newExports, "\n")
		}
	}
	return res, nil
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// cutState splits stderr at the last "\n<marker>\n": what precedes is the
// command's stderr, what follows the state.
func cutState(stderr, marker string) (before, state string, found bool) {
	sep := "\n" + marker + "\n"
	i := strings.LastIndex(stderr, sep)
	if i < 0 {
		return stderr, "", false
	}
	return stderr[:i], stderr[i+len(sep):], true
}
