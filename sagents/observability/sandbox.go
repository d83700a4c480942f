package observability

import (
	"context"
	"time"
)

// SandboxOp starts one sandbox operation: a command, a file operation, a
// background task, a session start or restart, an egress decision, or the
// acquire or release of a remote sandbox.
type SandboxOp struct {
	// Op names the operation: "exec", "python", "read_file", "write_file",
	// "start_background", "acquire", "egress", ...
	Op string
	// Mode is the sandbox mode ("local", "remote", "passthrough").
	Mode string
	// SandboxID identifies the sandbox ("" before it exists).
	SandboxID string
	// Path is the sandbox path the operation touches, if any. Commands and
	// file contents are never part of an event.
	Path string
	// TaskID names the background task, if any.
	TaskID string
	// Isolation is how the sandbox isolates commands ("bwrap", "gvisor",
	// "seatbelt", "container", "none"), and Network the network mode its
	// commands get ("off", "open", "allowlist"); "" when unknown.
	Isolation string
	Network   string
	// Start, when set, is when the operation began (a background command
	// reported once it has ended); zero means now.
	Start time.Time
}

// SandboxResult ends one sandbox operation.
type SandboxResult struct {
	// ExitCode and TimedOut describe a command's end (Command is true).
	Command  bool
	ExitCode int
	TimedOut bool
	// Signal is the signal that ended the command, if one did ("KILL").
	Signal string
	// NotFound says the answer was "no such file": an expected answer,
	// not a failure of the operation.
	NotFound bool
	// TaskID is the background task a start created.
	TaskID string
	// Checkpoint is what a checkpoint taken after an agent turn saved
	// (Sandbox.CheckpointTurn); nil otherwise.
	Checkpoint *CheckpointInfo
}

// CheckpointInfo describes a checkpoint of an agent turn.
type CheckpointInfo struct {
	ID   string // the checkpoint's id (the last one when the turn changed nothing)
	Turn int    // the agent turn whose end state it is (0: before the first)
	Size int64  // bytes it added (0: the turn changed nothing)
}

// SandboxHandler receives sandbox events. It is optional: the Manager
// sends them only to the handlers that implement it, so a handler written
// for the other families needs no change.
type SandboxHandler interface {
	SandboxStart(ctx context.Context, op SandboxOp) (context.Context, error)
	SandboxEnd(ctx context.Context, res SandboxResult) error
	SandboxError(ctx context.Context, err error) error
}

// SandboxStart starts a sandbox operation and returns the context that
// carries it.
func (m *Manager) SandboxStart(ctx context.Context, op SandboxOp) context.Context {
	if len(m.snapshot()) == 0 {
		return ctx
	}
	return m.start(ctx, KindSandbox, op.Op, "", "SandboxStart",
		func(h Handler, c context.Context) (context.Context, error) {
			if sh, ok := h.(SandboxHandler); ok {
				return sh.SandboxStart(c, op)
			}
			return c, nil
		})
}

// SandboxEnd ends the sandbox operation carried by ctx.
func (m *Manager) SandboxEnd(ctx context.Context, res SandboxResult) {
	m.end(ctx, KindSandbox, "SandboxEnd", func(h Handler, c context.Context) error {
		if sh, ok := h.(SandboxHandler); ok {
			return sh.SandboxEnd(c, res)
		}
		return nil
	})
}

// SandboxError ends the sandbox operation carried by ctx with an error.
func (m *Manager) SandboxError(ctx context.Context, err error) {
	m.fail(ctx, KindSandbox, "SandboxError", err)
}
