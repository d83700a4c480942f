package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

var (
	// ErrUnsupported is returned for capabilities a mode lacks.
	ErrUnsupported = errors.New("sandbox: not supported by this mode")
	// ErrClosed is returned by a Sandbox after Close.
	ErrClosed = errors.New("sandbox: handle is closed")
	// ErrIsolationUnavailable means the requested isolation cannot run on
	// this machine; the wrapping error names the cause and the fix.
	ErrIsolationUnavailable = errors.New("sandbox: isolation unavailable")
	// ErrUnknownTask is returned for a background task id the handle does
	// not know. It matches fs.ErrNotExist too.
	ErrUnknownTask = fmt.Errorf("sandbox: unknown background task: %w", fs.ErrNotExist)
	// ErrTooLong: a command line or an environment variable longer than
	// one argument of a program may be (MaxArgBytes); nothing ran. It
	// matches fs.ErrInvalid too. The wrapping *ArgTooLongError says which.
	ErrTooLong = fmt.Errorf("sandbox: argument too long: %w", fs.ErrInvalid)
)

// MaxArgBytes is the longest command line (and "NAME=value" of an
// environment variable) a command may be given: a page under Linux's
// MAX_ARG_STRLEN (32 pages), which every mode meets when it runs /bin/sh
// -c COMMAND, leaving room for what a mode puts around the command (a
// umask, an exec). Longer code belongs in a file.
const MaxArgBytes = 31 * 4096

// ArgTooLongError reports a command line or environment variable over
// MaxArgBytes, in every mode alike, before anything runs.
type ArgTooLongError struct {
	What string // "the command line" or "environment variable NAME"
	Len  int
}

func (e *ArgTooLongError) Error() string {
	return fmt.Sprintf("sandbox: %s is %d bytes, over the %d a command takes in one argument (Linux caps one at 128 KiB); "+
		"fix: write it to a file in the workspace (WriteFile) and run the file (sh script.sh, python3 prog.py)", e.What, e.Len, MaxArgBytes)
}

func (e *ArgTooLongError) Unwrap() error { return ErrTooLong }

// CheckArgs returns an *ArgTooLongError when command or an environment
// variable is longer than MaxArgBytes.
func CheckArgs(command string, env map[string]string) error {
	if len(command) > MaxArgBytes {
		return &ArgTooLongError{What: "the command line", Len: len(command)}
	}
	for k, v := range env {
		if n := len(k) + 1 + len(v); n > MaxArgBytes {
			return &ArgTooLongError{What: "environment variable " + k, Len: n}
		}
	}
	return nil
}

// Sentinels of the path errors. File operations return *fs.PathError
// whose Err wraps one of them, so errors.Is(err, ErrEscape) and
// errors.Is(err, fs.ErrPermission) both hold for an escape.
var (
	// ErrEscape: the path leaves the sandbox (outside every mount, ".."
	// or a symlink pointing out).
	ErrEscape = fmt.Errorf("path escapes the sandbox (%w)", fs.ErrPermission)
	// ErrReadOnly: a write to a read-only mount.
	ErrReadOnly = fmt.Errorf("read-only mount (%w)", fs.ErrPermission)
	// ErrBadPath: a path that can never name a file (a NUL byte), or an
	// operation the path does not allow (deleting the workspace itself).
	ErrBadPath = fmt.Errorf("path not allowed (%w)", fs.ErrPermission)
)

// NewPathError returns the *fs.PathError of op on path failing with
// sentinel (ErrEscape, ErrReadOnly, ErrBadPath), saying why.
func NewPathError(op, path string, sentinel error, why string) error {
	return &fs.PathError{Op: op, Path: path, Err: fmt.Errorf("%s: %w", why, sentinel)}
}

// ConfigError names the configuration field or variable that is wrong.
type ConfigError struct {
	Field  string // e.g. "sandbox.local.memory_limit_mb" or "SAGE_LOCAL_MEMORY_LIMIT_MB"
	Value  string
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("sandbox config: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("sandbox config: %s=%q: %s", e.Field, e.Value, e.Reason)
}

// RequirementsError reports a pip install of PythonOptions.Requirements
// that failed, in any mode; Result holds pip's output.
type RequirementsError struct {
	Mode         string // the mode that ran pip ("local", "aio"): the message's prefix
	Requirements []string
	Result       *CommandResult
	Fix          string // what to do about it, when the mode can tell
}

// PipError is what pip said last: its output from its last "ERROR:" line
// on, or all of it when it printed none.
func (e *RequirementsError) PipError() string {
	msg := strings.TrimSpace(e.Result.Stderr)
	if i := strings.LastIndex(msg, "\nERROR:"); i >= 0 {
		msg = msg[i+1:]
	}
	return msg
}

func (e *RequirementsError) Error() string {
	msg := e.PipError()
	if e.Fix != "" {
		msg += " (fix: " + e.Fix + ")"
	}
	return fmt.Sprintf("%s: pip install %s failed (exit %d, timed out %v): %s",
		e.Mode, strings.Join(e.Requirements, " "), e.Result.ExitCode, e.Result.TimedOut, msg)
}
