package sessiond

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// protocolVersion is the protocol version; a daemon refuses a request of another,
// naming both (a client and a daemon built from different sage versions
// meet after an upgrade: stopping the session ends the old daemon).
// Version 2 added python and fs, and file errors that keep their kind;
// version 3 task (a background task's status, output and kill).
const protocolVersion = 3

// stableVersion is the oldest version whose info and stop requests are
// those of protocolVersion: Describe and Stop send it, and a daemon serves info
// and stop of any version from it on, so that `sage session ls` and `sage
// session stop` work across an upgrade (the fix the refusal names).
const stableVersion = 1

// Request ops.
const (
	OpExec       = "exec"       // run a command, stream its output, return its result
	OpBackground = "background" // start a background task, return its id
	OpInfo       = "info"       // describe the daemon (Info)
	OpStop       = "stop"       // end the daemon and every process of the session
	OpPython     = "python"     // run Python code (Code), stream its output, return its result
	OpFS         = "fs"         // a file operation (FS)
	OpTask       = "task"       // a background task's status, output or kill (Task)
	// OpCheckpoint saves, lists, rolls back or exports the workspace's
	// checkpoints (Checkpoint). A daemon of version 3 that predates it
	// answers ErrProtocol (unknown op): nothing it could misread.
	OpCheckpoint = "checkpoint"
)

// Operations of OpCheckpoint (driver.Checkpointer).
const (
	CheckpointSave     = "save"     // Response.Checkpoints: the new one
	CheckpointList     = "list"     // Response.Checkpoints: all, oldest first
	CheckpointRollback = "rollback" // ID
	CheckpointExport   = "export"   // ID's files into Dir (a fork's workspace)
	CheckpointSync     = "sync"     // the live state into the host folder
)

// CheckpointRequest is one operation on the workspace's checkpoints.
type CheckpointRequest struct {
	Op  string `json:"op"`
	ID  string `json:"id,omitempty"`
	Dir string `json:"dir,omitempty"`
}

// Request is the first frame of a connection.
type Request struct {
	V  int    `json:"v"`
	Op string `json:"op"`
	// Key is the daemon's key (its directory's key file): a daemon serves
	// no request without it. Call, Run and Stop fill it in.
	Key string `json:"key,omitempty"`
	// Settings is the Fingerprint of the sandbox settings the client
	// expects; a daemon started with others refuses exec and background
	// (ErrSettings). Empty: any.
	Settings string            `json:"settings,omitempty"`
	Command  string            `json:"command,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Workdir  string            `json:"workdir,omitempty"`
	Timeout  time.Duration     `json:"timeout,omitempty"`
	// Stdin: the command's stdin follows as stdin frames and one
	// end-of-stdin frame; false means none (/dev/null).
	Stdin bool `json:"stdin,omitempty"`
	// Stream sends stdout and stderr as frames as they come; false keeps
	// them in the result only.
	Stream bool `json:"stream,omitempty"`
	// IdleTimeout, when set, replaces the daemon's idle timeout (0: never).
	IdleTimeout *time.Duration `json:"idle_timeout,omitempty"`
	// Code and Requirements are OpPython's source and the pip
	// requirements installed first.
	Code         string   `json:"code,omitempty"`
	Requirements []string `json:"requirements,omitempty"`
	// FS is OpFS's operation.
	FS *FSRequest `json:"fs,omitempty"`
	// Task is OpTask's operation.
	Task *TaskRequest `json:"task,omitempty"`
	// Checkpoint is OpCheckpoint's operation.
	Checkpoint *CheckpointRequest `json:"checkpoint,omitempty"`
}

// Operations of OpTask on a background task (OpBackground started it).
const (
	TaskStatus = "status" // Response.TaskState
	TaskOutput = "output" // Response.Output: its log from Offset, Max bytes at most
	TaskKill   = "kill"   // SIGTERM, then SIGKILL after a grace (Force: SIGKILL at once)
)

// TaskRequest is one operation on a background task.
type TaskRequest struct {
	Op     string `json:"op"`
	ID     string `json:"id"`
	Offset int64  `json:"offset,omitempty"`
	Max    int    `json:"max,omitempty"` // 0: 64 KiB
	Force  bool   `json:"force,omitempty"`
}

// File operations of OpFS.
const (
	FSRead  = "read"  // the file's bytes come as stdout frames
	FSWrite = "write" // its bytes are sent as stdin (Request.Stdin)
	FSList  = "ls"
	FSTree  = "tree"
	FSRm    = "rm"
)

// FSRequest is one file operation on a sandbox path.
type FSRequest struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Append bool   `json:"append,omitempty"` // write
	// MaxEntries bounds ls (and tree, in Tree); 0: driver.DefaultMaxEntries.
	MaxEntries int                `json:"max_entries,omitempty"`
	Tree       driver.TreeOptions `json:"tree"`
}

// FSResult is what ls and tree answer.
type FSResult struct {
	List      []driver.FileInfo `json:"list,omitempty"`
	Truncated bool              `json:"truncated,omitempty"`
	Tree      *driver.TreeNode  `json:"tree,omitempty"`
}

// Response is the last frame of a connection.
type Response struct {
	Result   *driver.CommandResult  `json:"result,omitempty"`
	Duration time.Duration          `json:"duration,omitempty"`
	Task     *driver.BackgroundTask `json:"task,omitempty"`
	Info     *Info                  `json:"info,omitempty"`
	FS       *FSResult              `json:"fs,omitempty"`
	// TaskState and Output answer OpTask's status and output.
	TaskState *driver.BackgroundState  `json:"task_state,omitempty"`
	Output    *driver.BackgroundOutput `json:"output,omitempty"`
	// Checkpoints answers OpCheckpoint's save and list.
	Checkpoints []driver.Checkpoint `json:"checkpoints,omitempty"`
	// Error and Kind describe a failure (see Error). PathOp and Path,
	// when set, say the failure was an *fs.PathError: the client gets
	// one back, with Error as its Err's text.
	Error  string `json:"error,omitempty"`
	Kind   string `json:"kind,omitempty"`
	PathOp string `json:"path_op,omitempty"`
	Path   string `json:"path,omitempty"`
}

// Info describes a running daemon.
type Info struct {
	Name      string    `json:"session"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	LastUsed  time.Time `json:"last_used"`
	Busy      int       `json:"busy"` // requests in flight
	Workspace string    `json:"workspace"`
	// IdleTimeout ends the daemon after this long without a request; 0:
	// never.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// MemoryBytes is the proportional set size (PSS) of the daemon and
	// every process of its session together; 0 where unknown.
	MemoryBytes int64  `json:"memory_bytes"`
	Settings    string `json:"settings"`
	// Config is the sandbox config the daemon was started with, as
	// Fingerprint hashes it (no secret, no default timeout), so that a
	// client refused for other settings can say which (SettingsDiff).
	Config json.RawMessage `json:"config,omitempty"`
}

// Error kinds and the sentinels they unwrap to.
var (
	// ErrSettings: the session runs with other sandbox settings.
	ErrSettings = errors.New("the session runs with other sandbox settings")
	// ErrRefused: the daemon serves another uid, or a client without its
	// key or in another namespace.
	ErrRefused = errors.New("refused")
	// ErrStopped: the daemon stopped while serving the request.
	ErrStopped = errors.New("the session stopped")
	// ErrProtocol: a malformed request or a version mismatch.
	ErrProtocol = errors.New("protocol error")
	// ErrNotRunning: no daemon serves the session.
	ErrNotRunning = errors.New("not running")
	// ErrTooLarge: a request over MaxRequest (a command, Python code or
	// environment too large for one request frame); nothing was sent.
	ErrTooLarge = errors.New("the request is too large for the session's socket")
	// ErrConfig: a sandbox setting of the session is wrong (a
	// *driver.ConfigError in the daemon, which names it).
	ErrConfig = errors.New("bad sandbox setting")
)

// kinds are the error kinds that cross the socket, the most specific
// first: an escape is "escape" (which is fs.ErrPermission too), not
// "permission".
var kinds = []struct {
	name string
	err  error
}{
	{"settings", ErrSettings}, {"config", ErrConfig}, {"refused", ErrRefused}, {"stopped", ErrStopped}, {"protocol", ErrProtocol},
	{"escape", driver.ErrEscape}, {"read_only", driver.ErrReadOnly}, {"bad_path", driver.ErrBadPath},
	{"unknown_task", driver.ErrUnknownTask}, {"unknown_checkpoint", driver.ErrUnknownCheckpoint},
	{"checkpoint_busy", driver.ErrCheckpointBusy}, {"command_running", driver.ErrCommandRunning}, {"unsupported", driver.ErrUnsupported},
	{"isolation", driver.ErrIsolationUnavailable}, {"closed", driver.ErrClosed},
	{"not_exist", fs.ErrNotExist}, {"permission", fs.ErrPermission}, {"exist", fs.ErrExist},
	{"invalid", fs.ErrInvalid}, {"deadline", context.DeadlineExceeded},
}

func kindOf(err error) string {
	if ce := (*driver.ConfigError)(nil); errors.As(err, &ce) {
		return "config"
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return ""
}

// Error is a failure the daemon reported; errors.Is matches the sentinel
// of its kind.
type Error struct {
	Kind string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error {
	for _, k := range kinds {
		if k.name == e.Kind {
			return k.err
		}
	}
	return nil
}

// errorResponse turns err into a Response. An *fs.PathError keeps its op
// and path, and its Err's kind.
func errorResponse(err error) Response {
	if pe, ok := err.(*fs.PathError); ok && pe.Err != nil {
		return Response{Error: pe.Err.Error(), Kind: kindOf(pe.Err), PathOp: pe.Op, Path: pe.Path}
	}
	return Response{Error: err.Error(), Kind: kindOf(err)}
}

// responseError is the error a failed response stands for: an *Error, or
// an *fs.PathError around one, so that errors.Is(err, fs.ErrNotExist)
// holds on the client as it did in the daemon, and the text is the same.
func responseError(r Response) error {
	e := &Error{Kind: r.Kind, Msg: r.Error}
	if r.PathOp != "" {
		return &fs.PathError{Op: r.PathOp, Path: r.Path, Err: e}
	}
	return e
}

// Fingerprint identifies a sandbox configuration: the daemon compares the
// client's with its own, so a command never runs under settings other
// than the ones it was given. The default timeout (each request carries
// its own) and the observer are left out.
func Fingerprint(cfg driver.Config) string {
	b, err := settingsJSON(cfg)
	if err != nil {
		return "unmarshalable:" + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// settingsJSON is cfg as Fingerprint hashes it.
func settingsJSON(cfg driver.Config) ([]byte, error) {
	cfg.Timeout, cfg.Observer = 0, nil
	cfg.Remote.APIKey = ""
	return json.Marshal(cfg)
}

// Difference is one setting a session's daemon runs with that a call
// asked otherwise: Key is its driver.Config path ("Local.MemoryLimitMB").
type Difference struct {
	Key           string
	Session, Call string // the values, as JSON
}

// SettingsDiff compares the config a daemon described (Info.Config)
// with the one a call asks for, key by key, sorted by key.
func SettingsDiff(session json.RawMessage, call driver.Config) ([]Difference, error) {
	b, err := settingsJSON(call)
	if err != nil {
		return nil, err
	}
	var a, c any
	if err := json.Unmarshal(session, &a); err != nil {
		return nil, fmt.Errorf("%w: the session's config: %v", ErrProtocol, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	sv, cv := map[string]string{}, map[string]string{}
	flatten("", a, sv)
	flatten("", c, cv)
	var out []Difference
	for k := range union(sv, cv) {
		if sv[k] != cv[k] {
			out = append(out, Difference{Key: k, Session: sv[k], Call: cv[k]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// flatten puts the leaves of v (objects are walked, lists and scalars
// are leaves, as JSON) into m under their dotted paths.
func flatten(prefix string, v any, m map[string]string) {
	if o, ok := v.(map[string]any); ok {
		for k, x := range o {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, x, m)
		}
		return
	}
	b, _ := json.Marshal(v)
	m[prefix] = string(b)
}

func union(a, b map[string]string) map[string]bool {
	u := make(map[string]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// readJSON reads one frame of kind and decodes it into v.
func readJSON(r io.Reader, kind byte, v any) error {
	f, err := readFrame(r)
	if err != nil {
		return err
	}
	if f.Kind != kind {
		return fmt.Errorf("%w: got a frame of kind %q, want %q", ErrProtocol, f.Kind, kind)
	}
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}

func writeJSON(w io.Writer, kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFrame(w, kind, b)
}
