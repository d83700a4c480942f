package sessiond

import (
	"context"
	"fmt"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// checkpoint runs one operation on the session's checkpoints.
func (s *Server) checkpoint(ctx context.Context, req Request) Response {
	c := req.Checkpoint
	if c == nil {
		return errorResponse(fmt.Errorf("%w: checkpoint request without an operation", ErrProtocol))
	}
	switch c.Op {
	case CheckpointSave:
		cp, err := s.Sandbox.Checkpoint(ctx)
		if err != nil {
			return s.failed(err)
		}
		return Response{Checkpoints: []driver.Checkpoint{cp}}
	case CheckpointList:
		list, err := s.Sandbox.Checkpoints(ctx)
		if err != nil {
			return s.failed(err)
		}
		if list == nil {
			list = []driver.Checkpoint{}
		}
		return Response{Checkpoints: list}
	case CheckpointRollback:
		if err := s.Sandbox.Rollback(ctx, driver.CheckpointID(c.ID)); err != nil {
			return s.failed(err)
		}
		return Response{}
	case CheckpointExport:
		ck, ok := s.Sandbox.Driver().(driver.Checkpointer)
		if !ok {
			return s.failed(fmt.Errorf("sandbox: fork: %w", driver.ErrUnsupported))
		}
		if err := ck.Export(ctx, driver.CheckpointID(c.ID), c.Dir); err != nil {
			return s.failed(err)
		}
		return Response{}
	case CheckpointSync:
		if err := s.Sandbox.Sync(ctx); err != nil {
			return s.failed(err)
		}
		return Response{}
	}
	return errorResponse(fmt.Errorf("%w: unknown checkpoint operation %q", ErrProtocol, c.Op))
}
