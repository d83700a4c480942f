package sandbox

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
	// Covers says what it saves: "files" (the workspace). Processes, the
	// session's /tmp and interpreter state are not saved, nor restored by
	// a rollback.
	Covers string `json:"covers"`
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
)

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

// Checkpoint saves the workspace's files: a later Rollback with the id
// restores exactly these bytes, modes and links. Processes are not
// saved.
func (s *Sandbox) Checkpoint(ctx context.Context) (Checkpoint, error) {
	c, ok := s.drv.(Checkpointer)
	if !ok {
		return Checkpoint{}, s.unsupported("checkpoint")
	}
	ctx, err := s.begin(ctx, "checkpoint", "", "")
	if err != nil {
		return Checkpoint{}, err
	}
	cp, err := c.Checkpoint(ctx)
	s.end(ctx, nil, err)
	return cp, err
}

// Rollback restores the checkpoint id; the checkpoints after it are
// dropped.
func (s *Sandbox) Rollback(ctx context.Context, id CheckpointID) error {
	c, ok := s.drv.(Checkpointer)
	if !ok {
		return s.unsupported("rollback")
	}
	ctx, err := s.begin(ctx, "rollback", string(id), "")
	if err != nil {
		return err
	}
	err = c.Rollback(ctx, id)
	s.end(ctx, nil, err)
	return err
}

// Checkpoints lists the sandbox's checkpoints, oldest first.
func (s *Sandbox) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	c, ok := s.drv.(Checkpointer)
	if !ok {
		return nil, s.unsupported("checkpoints")
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	return c.Checkpoints(ctx)
}

// Sync writes the live state of a sandbox with checkpoints into its host
// workspace folder (Close does it too).
func (s *Sandbox) Sync(ctx context.Context) error {
	c, ok := s.drv.(Checkpointer)
	if !ok {
		return s.unsupported("sync")
	}
	ctx, err := s.begin(ctx, "sync", "", "")
	if err != nil {
		return err
	}
	err = c.Sync(ctx)
	s.end(ctx, nil, err)
	return err
}

// Fork opens a new sandbox, of the same configuration, whose workspace
// starts as checkpoint id: workspace, an empty or missing host
// directory, receives a copy of its files, so the fork and its parent
// share nothing (writes of one are never seen by the other). The fork has
// checkpoints of its own; the caller closes it.
func (s *Sandbox) Fork(ctx context.Context, id CheckpointID, workspace string) (*Sandbox, error) {
	c, ok := s.drv.(Checkpointer)
	if !ok {
		return nil, s.unsupported("fork")
	}
	if workspace == "" {
		return nil, errors.New("sandbox: fork: the new workspace folder is required")
	}
	ctx, err := s.begin(ctx, "fork", string(id), "")
	if err != nil {
		return nil, err
	}
	err = c.Export(ctx, id, workspace)
	s.end(ctx, nil, err)
	if err != nil {
		return nil, err
	}
	cfg := s.cfg
	cfg.Workspace, cfg.SandboxID, cfg.RuntimeDir = workspace, "", ""
	return New(ctx, cfg)
}
