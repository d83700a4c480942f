package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
)

var (
	// ErrUnsupported is returned for capabilities a mode lacks.
	ErrUnsupported = errors.New("sandbox: not supported by this mode")
	// ErrClosed is returned by a Handle after Close.
	ErrClosed = errors.New("sandbox: handle is closed")
	// ErrIsolationUnavailable means the requested isolation cannot run on
	// this machine; the wrapping error names the cause and the fix.
	ErrIsolationUnavailable = errors.New("sandbox: isolation unavailable")
	// ErrUnknownTask is returned for a background task id the handle does
	// not know. It matches fs.ErrNotExist too.
	ErrUnknownTask = fmt.Errorf("sandbox: unknown background task: %w", fs.ErrNotExist)
)

// PathError reports a path that cannot be used: outside every mount, an
// escape through ".." or a symlink, or a write to a read-only mount.
// It matches fs.ErrPermission.
type PathError struct {
	Op     string // the operation, e.g. "write"
	Path   string // the path as given
	Reason string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("sandbox: %s %q: %s", e.Op, e.Path, e.Reason)
}

// Unwrap makes errors.Is(err, fs.ErrPermission) true.
func (e *PathError) Unwrap() error { return fs.ErrPermission }

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
