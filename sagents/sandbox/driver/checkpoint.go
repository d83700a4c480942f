package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// CheckpointID names one checkpoint of a sandbox's files.
type CheckpointID string

// Checkpoint is one saved state of the workspace.
type Checkpoint struct {
	ID   CheckpointID `json:"id"`
	Time time.Time    `json:"time"`
	// Size is what the checkpoint added on the host: the bytes of the
	// files written since the one before (0: nothing changed, and the
	// checkpoint cost nothing).
	Size int64 `json:"size"`
	// Layers is how many read-only layers its state stacks.
	Layers int `json:"layers"`
	// Covers says what it saves: "files" (the workspace), or
	// "files+processes" when Processes saved some too. Other processes,
	// the session's /tmp and the state of interpreters run per command are
	// not saved, nor restored by a rollback.
	Covers string `json:"covers"`
	// Processes are the processes whose state it saved with the files
	// (the stateful Python kernels of sandboxd's /v1/jupyter and
	// /v1/code, by fork template; see ProcessCheckpointer).
	Processes []string `json:"processes,omitempty"`
	// Turns are the agent turns whose end state it is (CheckpointTurn):
	// turn 0 is the state before the first turn; several when turns
	// after the first changed no file (they cost no new checkpoint).
	// Empty for a checkpoint taken otherwise.
	Turns []int `json:"turns,omitempty"`
	// Duration is what taking it cost, as the caller waited for it
	// (sub-millisecond for bwrap's layers; runsc's pause, checkpoint and
	// resume and a copy of the workspace under gVisor).
	Duration time.Duration `json:"duration_ns"`
}

var (
	// ErrUnknownCheckpoint is an id the sandbox never gave, dropped by a
	// rollback to an earlier one, or expired (merged away). It matches
	// fs.ErrNotExist too.
	ErrUnknownCheckpoint = fmt.Errorf("sandbox: unknown or expired checkpoint: %w", fs.ErrNotExist)
	// ErrCheckpointBusy: the workspace could not be frozen because a
	// process (a background task, a host file operation) holds a file
	// open for writing in it. Nothing changed.
	ErrCheckpointBusy = errors.New("sandbox: a file is open for writing in the workspace")
	// ErrCommandRunning: a checkpoint, rollback or fork came while a
	// command runs in the session (a long-lived shell or kernel counts);
	// they are taken between commands. Nothing changed.
	ErrCommandRunning = errors.New("sandbox: a command is running in the session; checkpoints are taken between commands")
	// ErrUnknownTurn is a turn no checkpoint was taken after (the agent
	// did not run it with checkpoints, a rollback dropped it, or its
	// checkpoint failed). It matches ErrUnknownCheckpoint too.
	ErrUnknownTurn = fmt.Errorf("sandbox: no checkpoint of that agent turn: %w", ErrUnknownCheckpoint)
)

// RollbackResult is what a rollback did to the processes (Restore).
type RollbackResult struct {
	ID CheckpointID `json:"id"`
	// Restored are the processes whose state is the checkpoint's again.
	Restored []string `json:"restored,omitempty"`
	// Stopped are the processes the rollback ended: kernels with no state
	// saved at the checkpoint (started after it, or past the bound of
	// held copies). They start afresh on next use.
	Stopped []string `json:"stopped,omitempty"`
}

// ProcessCheckpointer owns long-lived processes of a sandbox (the code
// kernels of aioserver) and takes part in its checkpoints: their state
// is saved with the files and restored with them, under the same ids.
// Register one with Sandbox.AddProcessCheckpointer.
type ProcessCheckpointer interface {
	// HoldProcesses keeps them between executions until release is
	// called; ErrCommandRunning when one executes (nothing held).
	HoldProcesses(ctx context.Context) (release func(), err error)
	// SaveProcesses saves their state as checkpoint id (the files just
	// were); live are the checkpoints that still exist: saved states of
	// others are freed. It returns what it saved.
	SaveProcesses(ctx context.Context, id CheckpointID, live []CheckpointID) (saved []string, err error)
	// RestoreProcesses makes their state checkpoint id's again (the files
	// just were); live as for SaveProcesses. A process with no state
	// saved at id is stopped.
	RestoreProcesses(ctx context.Context, id CheckpointID, live []CheckpointID) (restored, stopped []string, err error)
	// ForgetProcesses frees the saved states of checkpoints not in live.
	ForgetProcesses(ctx context.Context, live []CheckpointID)
}

// Checkpointer is a driver that saves and restores its files (local mode
// with checkpoints on; see docs/checkpoints.md).
type Checkpointer interface {
	// Checkpoint saves the workspace's state between commands.
	Checkpoint(ctx context.Context) (Checkpoint, error)
	// Rollback makes the workspace the checkpoint's state again; later
	// checkpoints are dropped.
	Rollback(ctx context.Context, id CheckpointID) error
	// Checkpoints lists the checkpoints, oldest first.
	Checkpoints(ctx context.Context) ([]Checkpoint, error)
	// Export writes the checkpoint's files into dir, an empty host
	// directory.
	Export(ctx context.Context, id CheckpointID, dir string) error
	// Sync writes the live state into the host workspace folder.
	Sync(ctx context.Context) error
}

// TurnCheckpointer is a Checkpointer that labels a checkpoint with the
// agent turn it ends (sage agent --checkpoints). A turn that changed no
// file since the last checkpoint makes no new one: the last one gets the
// turn too, and is returned. Checkpoints with turns outlive Close (see
// docs/checkpoints.md), so that a turn can be rolled back to after the
// run.
type TurnCheckpointer interface {
	Checkpointer
	CheckpointTurn(ctx context.Context, turn int) (Checkpoint, error)
}
