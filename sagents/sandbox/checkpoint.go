package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// procHooks are a Sandbox's ProcessCheckpointers.
type procHooks struct {
	mu   sync.Mutex
	list []*driver.ProcessCheckpointer
}

// AddProcessCheckpointer makes p take part in the sandbox's checkpoints,
// rollbacks and syncs until remove is called.
func (s *Sandbox) AddProcessCheckpointer(p driver.ProcessCheckpointer) (remove func()) {
	ref := &p
	s.procs.mu.Lock()
	s.procs.list = append(s.procs.list, ref)
	s.procs.mu.Unlock()
	return func() {
		s.procs.mu.Lock()
		s.procs.list = slices.DeleteFunc(s.procs.list, func(q *driver.ProcessCheckpointer) bool { return q == ref })
		s.procs.mu.Unlock()
	}
}

// heldProcs holds every ProcessCheckpointer between executions (all or
// none) and returns them with the release of all.
func (s *Sandbox) heldProcs(ctx context.Context) ([]driver.ProcessCheckpointer, func(), error) {
	s.procs.mu.Lock()
	refs := slices.Clone(s.procs.list)
	s.procs.mu.Unlock()
	var held []driver.ProcessCheckpointer
	var rels []func()
	release := func() {
		for _, r := range rels {
			r()
		}
	}
	for _, ref := range refs {
		r, err := (*ref).HoldProcesses(ctx)
		if err != nil {
			release()
			return nil, nil, err
		}
		held, rels = append(held, *ref), append(rels, r)
	}
	return held, release, nil
}

// liveIDs are the ids of c's checkpoints.
func liveIDs(ctx context.Context, c driver.Checkpointer) []CheckpointID {
	list, _ := c.Checkpoints(ctx)
	ids := make([]CheckpointID, 0, len(list))
	for _, e := range list {
		ids = append(ids, e.ID)
	}
	return ids
}

// withProcs runs the files' checkpoint take with the processes held, then
// saves their state under its id.
func (s *Sandbox) withProcs(ctx context.Context, c driver.Checkpointer, take func() (Checkpoint, error)) (Checkpoint, error) {
	procs, release, err := s.heldProcs(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	defer release()
	cp, err := take()
	if err != nil || len(procs) == 0 {
		return cp, err
	}
	live := liveIDs(ctx, c)
	var errs []error
	for _, p := range procs {
		saved, err := p.SaveProcesses(ctx, cp.ID, live)
		cp.Processes = append(cp.Processes, saved...)
		errs = append(errs, err)
	}
	if len(cp.Processes) > 0 {
		cp.Covers += "+processes"
	}
	if err := errors.Join(errs...); err != nil {
		return cp, fmt.Errorf("sandbox: checkpoint %s saved the files, not every process: %w", cp.ID, err)
	}
	return cp, nil
}

// Checkpoint saves the workspace's files: a later Rollback with the id
// restores exactly these bytes, modes and links. Processes are not
// saved.
func (s *Sandbox) Checkpoint(ctx context.Context) (Checkpoint, error) {
	c, ok := s.drv.(driver.Checkpointer)
	if !ok {
		return Checkpoint{}, s.unsupported("checkpoint")
	}
	ctx, err := s.begin(ctx, "checkpoint", "", "")
	if err != nil {
		return Checkpoint{}, err
	}
	cp, err := s.withProcs(ctx, c, func() (Checkpoint, error) { return c.Checkpoint(ctx) })
	s.end(ctx, nil, err)
	return cp, err
}

// CheckpointTurn saves the workspace's files as the state after agent
// turn turn (0: before the first); an unchanged workspace reuses the last
// checkpoint, at no cost (TurnCheckpointer). Its event carries the id and
// the turn.
func (s *Sandbox) CheckpointTurn(ctx context.Context, turn int) (Checkpoint, error) {
	c, ok := s.drv.(driver.TurnCheckpointer)
	if !ok {
		return Checkpoint{}, s.unsupported("checkpoint")
	}
	if turn < 0 {
		return Checkpoint{}, fmt.Errorf("sandbox: checkpoint: turn %d is negative; fix: number turns from 1 (0 is the state before the first)", turn)
	}
	ctx, err := s.begin(ctx, "checkpoint", "", "")
	if err != nil {
		return Checkpoint{}, err
	}
	cp, err := s.withProcs(ctx, c, func() (Checkpoint, error) { return c.CheckpointTurn(ctx, turn) })
	if err != nil {
		s.end(ctx, nil, err)
		return cp, err
	}
	info := &observability.CheckpointInfo{ID: string(cp.ID), Turn: turn, Size: cp.Size}
	if len(cp.Turns) > 0 && cp.Turns[0] != turn { // the last one again: this turn added nothing
		info.Size = 0
	}
	s.obs.SandboxEnd(ctx, observability.SandboxResult{Checkpoint: info})
	return cp, nil
}

// CheckpointOfTurn is the checkpoint whose state is the end of agent turn
// turn, from list (Checkpoints); an error matching ErrUnknownTurn when
// there is none.
func CheckpointOfTurn(list []Checkpoint, turn int) (Checkpoint, error) {
	var have []int
	for _, c := range list {
		if slices.Contains(c.Turns, turn) {
			return c, nil
		}
		have = append(have, c.Turns...)
	}
	if len(have) == 0 {
		return Checkpoint{}, &turnError{turn: turn, fix: "no checkpoint is of an agent turn; fix: run the agent with checkpoints (sage agent --checkpoints)"}
	}
	return Checkpoint{}, &turnError{turn: turn, fix: fmt.Sprintf("fix: pick a turn from %d to %d", slices.Min(have), slices.Max(have))}
}

// turnError is an agent turn without a checkpoint (ErrUnknownTurn).
type turnError struct {
	turn int
	fix  string
}

func (e *turnError) Error() string {
	return fmt.Sprintf("sandbox: agent turn %d has no checkpoint: %s", e.turn, e.fix)
}

func (e *turnError) Unwrap() error { return ErrUnknownTurn }

// RollbackTurn restores the state after agent turn turn (0: before the
// first), and returns the checkpoint it rolled back to.
func (s *Sandbox) RollbackTurn(ctx context.Context, turn int) (Checkpoint, error) {
	list, err := s.Checkpoints(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	cp, err := CheckpointOfTurn(list, turn)
	if err != nil {
		return Checkpoint{}, err
	}
	return cp, s.Rollback(ctx, cp.ID)
}

// Rollback restores the checkpoint id (Restore without its result); the
// checkpoints after it are dropped.
func (s *Sandbox) Rollback(ctx context.Context, id CheckpointID) error {
	_, err := s.Restore(ctx, id)
	return err
}

// Restore restores the checkpoint id: its files and, where a
// ProcessCheckpointer saved them, its processes' state (a Python
// kernel's variables); kernels without a state saved there are stopped.
// The checkpoints after it are dropped. The result names the processes
// restored and stopped; background tasks and other processes run on.
func (s *Sandbox) Restore(ctx context.Context, id CheckpointID) (RollbackResult, error) {
	res := RollbackResult{ID: id}
	c, ok := s.drv.(driver.Checkpointer)
	if !ok {
		return res, s.unsupported("rollback")
	}
	ctx, err := s.begin(ctx, "rollback", string(id), "")
	if err != nil {
		return res, err
	}
	procs, release, err := s.heldProcs(ctx)
	if err != nil {
		s.end(ctx, nil, err)
		return res, err
	}
	defer release()
	err = c.Rollback(ctx, id)
	if err == nil && len(procs) > 0 {
		live := liveIDs(ctx, c)
		var errs []error
		for _, p := range procs {
			restored, stopped, err := p.RestoreProcesses(ctx, id, live)
			res.Restored, res.Stopped = append(res.Restored, restored...), append(res.Stopped, stopped...)
			errs = append(errs, err)
		}
		if err = errors.Join(errs...); err != nil {
			err = fmt.Errorf("sandbox: rollback to %s restored the files, not every process: %w", id, err)
		}
	}
	s.end(ctx, nil, err)
	return res, err
}

// Checkpoints lists the sandbox's checkpoints, oldest first.
func (s *Sandbox) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	c, ok := s.drv.(driver.Checkpointer)
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
	c, ok := s.drv.(driver.Checkpointer)
	if !ok {
		return s.unsupported("sync")
	}
	ctx, err := s.begin(ctx, "sync", "", "")
	if err != nil {
		return err
	}
	err = c.Sync(ctx)
	if err == nil {
		s.forgetProcs(ctx, c)
	}
	s.end(ctx, nil, err)
	return err
}

// Export copies checkpoint id's files into dir, an empty or missing host
// directory (a fork's workspace, for a sandbox that another process
// opens: sage session fork, the fork tool).
func (s *Sandbox) Export(ctx context.Context, id CheckpointID, dir string) error {
	c, ok := s.drv.(driver.Checkpointer)
	if !ok {
		return s.unsupported("fork")
	}
	if dir == "" {
		return errors.New("sandbox: fork: the new workspace folder is required")
	}
	ctx, err := s.begin(ctx, "fork", string(id), "")
	if err != nil {
		return err
	}
	err = c.Export(ctx, id, dir)
	s.end(ctx, nil, err)
	return err
}

// Fork opens a new sandbox, of the same configuration, whose workspace
// starts as checkpoint id; workspace is an empty or missing host
// directory. A driver that can (driver.Forker: local mode) opens the fork
// on the checkpoint's frozen layers, shared read-only, and workspace
// receives the fork's files at its Close or Sync; others copy the files
// into workspace first. Either way writes of one are never seen by the
// other. The fork has checkpoints of its own; the caller closes it.
func (s *Sandbox) Fork(ctx context.Context, id CheckpointID, workspace string) (*Sandbox, error) {
	c, ok := s.drv.(driver.Checkpointer)
	if !ok {
		return nil, s.unsupported("fork")
	}
	if workspace == "" {
		return nil, errors.New("sandbox: fork: the new workspace folder is required")
	}
	cfg := s.cfg
	cfg.Workspace, cfg.SandboxID, cfg.RuntimeDir = workspace, "", ""
	if f, ok := s.drv.(driver.Forker); ok {
		ctx, err := s.begin(ctx, "fork", string(id), "")
		if err != nil {
			return nil, err
		}
		d, err := f.ForkDriver(ctx, id, cfg)
		s.end(ctx, nil, err)
		if err != nil {
			return nil, err
		}
		return NewFromDriver(cfg, d), nil
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
	return New(ctx, cfg)
}

// forgetProcs frees the processes' saved states of dropped checkpoints.
func (s *Sandbox) forgetProcs(ctx context.Context, c driver.Checkpointer) {
	s.procs.mu.Lock()
	refs := slices.Clone(s.procs.list)
	s.procs.mu.Unlock()
	if len(refs) == 0 {
		return
	}
	live := liveIDs(ctx, c)
	for _, ref := range refs {
		(*ref).ForgetProcesses(ctx, live)
	}
}
