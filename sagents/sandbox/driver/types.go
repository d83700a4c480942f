package driver

import (
	"encoding/json"
	"io"
	"time"
)

// Type is a sandbox mode.
type Type string

// The sandbox modes.
const (
	// Local isolates a per-session workspace with bubblewrap (Linux) or
	// Seatbelt (macOS).
	Local Type = "local"
	// Remote drives a sandbox through a registered remote provider.
	Remote Type = "remote"
	// Passthrough runs commands directly on the host, without isolation.
	// It exists for debugging.
	Passthrough Type = "passthrough"
)

// Defaults shared by all providers.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultOutputLimit = 1 << 20 // bytes, stdout and stderr together
	DefaultKillGrace   = 2 * time.Second
)

// VolumeMount makes a host directory visible inside the sandbox.
type VolumeMount struct {
	HostPath    string `json:"host_path" yaml:"host_path"`
	SandboxPath string `json:"sandbox_path" yaml:"sandbox_path"`
	ReadOnly    bool   `json:"read_only,omitempty" yaml:"read_only,omitempty"`
}

// ExecOptions tune one command.
type ExecOptions struct {
	// Workdir is a sandbox path (relative paths start at the workspace).
	// Empty means the workspace.
	Workdir string
	// Timeout is the wall-clock limit; 0 means the handle's default
	// (DefaultTimeout unless the config says otherwise).
	Timeout time.Duration
	// Env adds variables to the allowlisted environment.
	Env map[string]string
	// Stdin feeds the command; nil means /dev/null.
	Stdin io.Reader
	// OnStdout and OnStderr, when set, receive output chunks as they
	// arrive. They are called from one goroutine per stream and must not
	// retain the slice.
	OnStdout func([]byte)
	OnStderr func([]byte)
	// OutputLimit bounds the captured stdout and stderr together, in bytes;
	// 0 means DefaultOutputLimit.
	OutputLimit int
	// Resident marks a long-lived server process (a code kernel) that
	// checkpoints, rollbacks and forks may be taken beside, as beside a
	// background task: its owner saves and restores its state
	// (ProcessCheckpointer) and keeps it from running code meanwhile.
	Resident bool
}

// PythonOptions tune one ExecutePython call.
type PythonOptions struct {
	ExecOptions
	// Requirements are pip requirement specifiers installed first.
	Requirements []string
	// OnSetup, when set, is called as a set-up step that can take seconds
	// begins (such as "creating the session's Python environment"); the
	// step is over when the function it returns is called. Providers call
	// it through Step, and only for steps they really run.
	OnSetup func(step string) (done func())
}

// Step reports the start of a set-up step to OnSetup and returns the
// function that ends it (a no-op without OnSetup).
func (o PythonOptions) Step(step string) (done func()) {
	if o.OnSetup == nil {
		return func() {}
	}
	if done = o.OnSetup(step); done == nil {
		return func() {}
	}
	return done
}

// CommandResult says how a command ended. A timed-out command still
// carries the output it produced.
type CommandResult struct {
	Success  bool          `json:"success"`
	Stdout   string        `json:"stdout"`
	Stderr   string        `json:"stderr"`
	ExitCode int           `json:"exit_code"`
	Duration time.Duration `json:"-"`
	TimedOut bool          `json:"timed_out"`
	// Signal names the signal that ended the command (for example
	// "SIGKILL"), empty when it exited on its own.
	Signal string `json:"signal,omitempty"`
	// Truncated is true when either stream lost bytes to the output limit.
	Truncated          bool  `json:"truncated"`
	StdoutDroppedBytes int64 `json:"stdout_dropped_bytes"`
	StderrDroppedBytes int64 `json:"stderr_dropped_bytes"`
	// CPUTimeExceeded is true when the command was killed because all its
	// processes together used up the CPU time limit; ExitCode is then
	// 128+SIGXCPU (152) and Signal "SIGXCPU".
	CPUTimeExceeded bool `json:"cpu_time_exceeded,omitempty"`
	// LimitsEnforced says which resource limits held for the command, and
	// how; nil when the provider does not say.
	LimitsEnforced *LimitsEnforced `json:"limits_enforced,omitempty"`
	// SessionRestarted is true when the command ran in a new session
	// sandbox that replaced one that went idle or died: /tmp and the
	// session's processes are gone, the workspace is intact.
	SessionRestarted bool `json:"session_restarted,omitempty"`
}

// LimitsEnforced reports how each resource limit of a command is
// enforced. A provider fills in only what holds: a limit it cannot
// enforce is reported as EnforcedNone, never as more than it is.
type LimitsEnforced struct {
	CPUTime  Enforcement `json:"cpu_time"`
	Memory   Enforcement `json:"memory"`
	Pids     Enforcement `json:"pids"`
	FileSize Enforcement `json:"file_size"`
}

// Enforcement says how a limit holds.
type Enforcement string

// The ways a limit holds, from the strongest.
const (
	// EnforcedCgroup: a cgroup bounds all the command's processes
	// together, memory including shmem, memfd and tmpfs pages.
	EnforcedCgroup Enforcement = "cgroup"
	// EnforcedUserNS: an rlimit the kernel counts per user namespace, so
	// for the whole sandbox (RLIMIT_NPROC of an unprivileged sandbox).
	EnforcedUserNS Enforcement = "userns"
	// EnforcedPerUser: an rlimit counted for all processes of the host
	// user together (stricter than the command alone).
	EnforcedPerUser Enforcement = "rlimit-per-user"
	// EnforcedPerProcess: an rlimit each process gets anew, so a command
	// with N processes may use N times the limit (and RLIMIT_AS does not
	// count shared memory files).
	EnforcedPerProcess Enforcement = "rlimit-per-process"
	// EnforcedNone: no limit.
	EnforcedNone Enforcement = "none"
)

// MarshalJSON adds duration_ms to the snake_case fields.
func (r CommandResult) MarshalJSON() ([]byte, error) {
	type plain CommandResult
	return json.Marshal(struct {
		plain
		DurationMS int64 `json:"duration_ms"`
	}{plain(r), r.Duration.Milliseconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *CommandResult) UnmarshalJSON(b []byte) error {
	type plain CommandResult
	var v struct {
		plain
		DurationMS int64 `json:"duration_ms"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = CommandResult(v.plain)
	r.Duration = time.Duration(v.DurationMS) * time.Millisecond
	return nil
}

// WriteOptions tune WriteFile.
type WriteOptions struct {
	// Append adds to the end of the file instead of replacing it. Without
	// it, the file is replaced atomically (temp file + rename).
	Append bool
	// Perm is used for new files; 0 means 0o644.
	Perm uint32
}

// FileInfo describes one directory entry, by its sandbox path.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	IsDir   bool      `json:"is_dir"`
	Symlink bool      `json:"symlink,omitempty"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// TreeOptions bound FileTree.
type TreeOptions struct {
	// MaxDepth limits recursion; 0 means 3.
	MaxDepth int
	// MaxItems limits the entries listed per directory; 0 means 100.
	MaxItems int
	// Hidden includes names starting with a dot.
	Hidden bool
	// MaxEntries bounds the directory entries read for the whole tree
	// (memory and time); 0 means DefaultMaxEntries. When the walk stops
	// there, the root's Truncated is set.
	MaxEntries int
}

// WithDefaults fills in the zero limits: depth 3, 100 items a directory,
// DefaultMaxEntries entries; every driver's FileTree starts with it.
func (o TreeOptions) WithDefaults() TreeOptions {
	if o.MaxDepth <= 0 {
		o.MaxDepth = 3
	}
	if o.MaxItems <= 0 {
		o.MaxItems = 100
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	return o
}

// DefaultMaxEntries is the default bound of FileTree (TreeOptions) and of
// the CLI's listings.
const DefaultMaxEntries = 10000

// TreeNode is one node of FileTree's result.
type TreeNode struct {
	Name     string      `json:"name"`
	Path     string      `json:"path"`
	IsDir    bool        `json:"is_dir"`
	Size     int64       `json:"size,omitempty"`
	Children []*TreeNode `json:"children,omitempty"`
	// Omitted counts entries left out by MaxItems, or, when the node is a
	// directory at MaxDepth, the entries not descended into. Entries never
	// read because of MaxEntries are not counted.
	Omitted int `json:"omitted,omitempty"`
	// Truncated, on the root, says the walk stopped at
	// TreeOptions.MaxEntries: directories may hold more than shown.
	Truncated bool `json:"truncated,omitempty"`
}

// CopyOptions tune CopyFromHost.
type CopyOptions struct {
	// Ignore holds glob patterns (path.Match syntax) matched against each
	// entry's base name and its slash-separated path relative to the
	// source; a matching directory is skipped whole.
	Ignore []string
}

// CopyResult counts what CopyFromHost did.
type CopyResult struct {
	Files   int   `json:"files"`
	Dirs    int   `json:"dirs"`
	Bytes   int64 `json:"bytes"`
	Ignored int   `json:"ignored"`
	// SkippedSymlinks lists source symlinks that were not copied
	// (relative to the source).
	SkippedSymlinks []string `json:"skipped_symlinks,omitempty"`
}

// BackgroundTask identifies a started background command.
type BackgroundTask struct {
	ID      string `json:"task_id"`
	PID     int    `json:"pid"`
	LogPath string `json:"log_path"`
}

// BackgroundOutput is one read of a background task's log.
type BackgroundOutput struct {
	Text       string `json:"text"`
	NextOffset int64  `json:"next_offset"`
}

// BackgroundState is a background task's status.
type BackgroundState struct {
	Alive    bool   `json:"alive"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// CPUTimeExceeded: the task was killed for using up its CPU time.
	CPUTimeExceeded bool `json:"cpu_time_exceeded,omitempty"`
}
