package sessiond

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
)

// Version is the protocol version; a daemon refuses a request of another.
const Version = 1

// Request ops.
const (
	OpExec       = "exec"       // run a command, stream its output, return its result
	OpBackground = "background" // start a background task, return its id
	OpInfo       = "info"       // describe the daemon (Info)
	OpStop       = "stop"       // end the daemon and every process of the session
)

// Request is the first frame of a connection.
type Request struct {
	V  int    `json:"v"`
	Op string `json:"op"`
	// Settings is the Fingerprint of the sandbox settings the client
	// expects; a daemon started with others refuses exec and background
	// (ErrSettings). Empty: any.
	Settings string            `json:"settings,omitempty"`
	Command  string            `json:"command,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Workdir  string            `json:"workdir,omitempty"`
	Timeout  time.Duration     `json:"timeout,omitempty"`
	// Stdin: the command's stdin follows as KindStdin frames and one
	// KindStdinEOF; false means none (/dev/null).
	Stdin bool `json:"stdin,omitempty"`
	// Stream sends stdout and stderr as frames as they come; false keeps
	// them in the result only.
	Stream bool `json:"stream,omitempty"`
	// IdleTimeout, when set, replaces the daemon's idle timeout (0: never).
	IdleTimeout *time.Duration `json:"idle_timeout,omitempty"`
}

// Response is the last frame of a connection.
type Response struct {
	Result   *sandbox.CommandResult  `json:"result,omitempty"`
	Duration time.Duration           `json:"duration,omitempty"`
	Task     *sandbox.BackgroundTask `json:"task,omitempty"`
	Info     *Info                   `json:"info,omitempty"`
	// Error and Kind describe a failure (see Error).
	Error string `json:"error,omitempty"`
	Kind  string `json:"kind,omitempty"`
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
}

// Error kinds and the sentinels they unwrap to.
var (
	// ErrSettings: the session runs with other sandbox settings.
	ErrSettings = errors.New("the session runs with other sandbox settings")
	// ErrRefused: the daemon serves another uid.
	ErrRefused = errors.New("refused")
	// ErrStopped: the daemon stopped while serving the request.
	ErrStopped = errors.New("the session stopped")
	// ErrProtocol: a malformed request or a version mismatch.
	ErrProtocol = errors.New("protocol error")
	// ErrNotRunning: no daemon serves the session.
	ErrNotRunning = errors.New("not running")
)

var kinds = map[string]error{"settings": ErrSettings, "refused": ErrRefused, "stopped": ErrStopped,
	"protocol": ErrProtocol}

// Error is a failure the daemon reported; errors.Is matches the sentinel
// of its kind.
type Error struct {
	Kind string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error { return kinds[e.Kind] }

// errorResponse turns err into a Response.
func errorResponse(err error) Response {
	r := Response{Error: err.Error()}
	for k, sentinel := range kinds {
		if errors.Is(err, sentinel) {
			r.Kind = k
		}
	}
	return r
}

// Fingerprint identifies a sandbox configuration: the daemon compares the
// client's with its own, so a command never runs under settings other
// than the ones it was given. The default timeout (each request carries
// its own) and the observer are left out.
func Fingerprint(cfg sandbox.Config) string {
	cfg.Timeout, cfg.Observer = 0, nil
	cfg.Remote.APIKey = ""
	b, err := json.Marshal(cfg)
	if err != nil {
		return "unmarshalable:" + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// readJSON reads one frame of kind and decodes it into v.
func readJSON(r io.Reader, kind byte, v any) error {
	f, err := ReadFrame(r)
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
	return WriteFrame(w, kind, b)
}
