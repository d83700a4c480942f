package aioserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// The Python kernels take part in the sandbox's checkpoints by a fork
// template (see pythonDriver): at a checkpoint the kernel forks, and the
// copy, blocked on a pipe, holds its variables; a rollback ends the live
// kernel and resumes the copy (which first forks a fresh copy, for a
// second rollback to the same checkpoint). kernels is the Handle's
// driver.ProcessCheckpointer.

// maxHeldCopies bounds the copies one kernel holds (each costs what its
// pages written since cost): a checkpoint past it frees the oldest, whose
// rollback then stops the kernel instead.
const maxHeldCopies = 16

// kernelControlTimeout bounds one checkpoint operation of a kernel (a
// fork and a pipe write).
const kernelControlTimeout = 10 * time.Second

var _ driver.ProcessCheckpointer = (*kernels)(nil)

// HoldProcesses takes every kernel's execution lock: a kernel executing
// code is a running command (driver.ErrCommandRunning), nothing held.
func (ks *kernels) HoldProcesses(ctx context.Context) (func(), error) {
	ks.mu.Lock()
	var held []*kernel
	release := func() {
		for _, k := range held {
			k.exec.Unlock()
		}
		ks.mu.Unlock()
	}
	for key, k := range ks.m {
		if !k.exec.TryLock() {
			release()
			return nil, fmt.Errorf("aioserver: the %s code session %q is executing: %w; fix: wait for it to end",
				k.lang, sessionOf(key), driver.ErrCommandRunning)
		}
		held = append(held, k)
	}
	return release, nil
}

func sessionOf(key string) string {
	_, id, _ := strings.Cut(key, "\x00")
	return id
}

// keepOf is held restricted to live (the checkpoints that still exist),
// plus extra, at most maxHeldCopies, the newest.
func keepOf(held, live []driver.CheckpointID, extra ...driver.CheckpointID) []driver.CheckpointID {
	var keep []driver.CheckpointID
	for _, id := range append(slices.Clone(held), extra...) {
		if slices.Contains(live, id) && !slices.Contains(keep, id) {
			keep = append(keep, id)
		}
	}
	if n := len(keep) - maxHeldCopies; n > 0 {
		keep = keep[n:]
	}
	if keep == nil {
		keep = []driver.CheckpointID{}
	}
	return keep
}

// SaveProcesses forks a copy of each live Python kernel as checkpoint id
// (the caller holds them); Node kernels have no fork template and are
// not saved (a rollback stops them).
func (ks *kernels) SaveProcesses(ctx context.Context, id driver.CheckpointID, live []driver.CheckpointID) ([]string, error) {
	var saved []string
	var errs []error
	for key, k := range ks.m {
		if k.lang != langPython || !k.alive() {
			continue
		}
		keep := keepOf(k.held, live, id)
		a, err := k.call(ctx, map[string]any{"op": "checkpoint", "id": id, "keep": keep}, kernelControlTimeout)
		if err == nil && a.Status != "ok" {
			err = fmt.Errorf("%s: %s", a.Ename, a.Evalue)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("python kernel %q: %w", sessionOf(key), err))
			continue
		}
		k.held = keep
		saved = append(saved, "python kernel "+sessionOf(key))
	}
	return saved, errors.Join(errs...)
}

// RestoreProcesses resumes each Python kernel's copy of checkpoint id as
// the kernel; kernels without one (started after it, Node, or past the
// bound) are stopped, to start afresh on their next use.
func (ks *kernels) RestoreProcesses(ctx context.Context, id driver.CheckpointID, live []driver.CheckpointID) (restored, stopped []string, err error) {
	var errs []error
	for key, k := range ks.m {
		name := k.lang + " kernel " + sessionOf(key)
		if !k.alive() {
			continue
		}
		if !slices.Contains(k.held, id) {
			k.close()
			delete(ks.m, key)
			stopped = append(stopped, name)
			continue
		}
		keep := keepOf(k.held, live, id)
		a, err := k.call(ctx, map[string]any{"op": "rollback", "id": id, "keep": keep}, kernelControlTimeout)
		if err == nil && a.Status != "ok" {
			err = fmt.Errorf("%s: %s", a.Ename, a.Evalue)
		}
		if err != nil {
			k.close()
			delete(ks.m, key)
			stopped = append(stopped, name)
			errs = append(errs, fmt.Errorf("%s: %w; it was stopped", name, err))
			continue
		}
		k.held = keep
		restored = append(restored, name)
	}
	return restored, stopped, errors.Join(errs...)
}

// ForgetProcesses frees the copies of checkpoints not in live.
func (ks *kernels) ForgetProcesses(ctx context.Context, live []driver.CheckpointID) {
	release, err := ks.HoldProcesses(ctx)
	if err != nil {
		return // an executing kernel frees them at the next checkpoint or rollback
	}
	defer release()
	for _, k := range ks.m {
		if k.lang != langPython || !k.alive() || len(k.held) == 0 {
			continue
		}
		keep := keepOf(k.held, live)
		if len(keep) == len(k.held) {
			continue
		}
		if _, err := k.call(ctx, map[string]any{"op": "drop", "keep": keep}, kernelControlTimeout); err == nil {
			k.held = keep
		}
	}
}
