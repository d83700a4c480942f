package driver

import "context"

// Forker is a Checkpointer that opens a fork in this process without
// copying the checkpoint's files: the fork stands on the checkpoint's
// frozen layers, read-only, with a writable layer of its own (local mode
// with checkpoints on; see docs/checkpoints.md, "Fork"). cfg is the
// fork's configuration: the parent's, with the fork's workspace folder
// (empty or missing), which receives the fork's files at its Close or
// Sync. The caller closes the driver returned.
type Forker interface {
	Checkpointer
	ForkDriver(ctx context.Context, id CheckpointID, cfg Config) (Driver, error)
}
