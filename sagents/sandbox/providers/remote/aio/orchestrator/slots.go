package orchestrator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// userDataDirs are a thread's directories, mounted under UserDataPath.
var userDataDirs = []string{"workspace", "uploads", "outputs"}

// slotDir is a pool slot's host directory, bound at UserDataPath.
func (p *Provider) slotDir(slot string) string {
	return filepath.Join(p.o.Home, "pool", slot, "user-data")
}

func (p *Provider) threadData(threadID string) string {
	return filepath.Join(p.o.Home, "threads", threadID, "user-data")
}

// slotMounts creates the slot directory with empty placeholders (the
// sandbox's workspace must exist when it starts) and mounts it, plus the
// skills directory and the configured mounts, as threadMounts does.
func (p *Provider) slotMounts(slot string) ([]driver.VolumeMount, error) {
	dir := p.slotDir(slot)
	// The owner file comes first: a sweep leaves a slot directory whose
	// owner it cannot name alone for a while (slotGrace).
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("pool slot directory: %w", err)
	}
	if err := os.WriteFile(p.slotOwnerFile(slot), []byte(p.owner()), 0o600); err != nil {
		return nil, errors.Join(fmt.Errorf("pool slot directory: %w", err), p.removeSlot(slot))
	}
	for _, d := range userDataDirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, errors.Join(fmt.Errorf("pool slot directory: %w", err), p.removeSlot(slot))
		}
	}
	ms := []driver.VolumeMount{{HostPath: dir, SandboxPath: UserDataPath}}
	if fi, err := os.Stat(p.o.SkillsDir); err == nil && fi.IsDir() {
		ms = append(ms, driver.VolumeMount{HostPath: p.o.SkillsDir, SandboxPath: SkillsPath, ReadOnly: true})
	}
	return append(ms, p.o.Mounts...), nil
}

func (p *Provider) removeSlot(slot string) error {
	if !driver.ValidID(slot) {
		return fmt.Errorf("pool slot %q: not a valid slot id", slot)
	}
	if err := os.RemoveAll(filepath.Join(p.o.Home, "pool", slot)); err != nil {
		return fmt.Errorf("remove pool slot directory: %w", err)
	}
	return nil
}

// attachSlot moves the thread's directories into the slot directory (a
// rename each, on one file system: nothing is copied) and leaves a
// symlink to the slot where they were, so the host sees them in place.
// The slot's placeholders must be empty: the sandbox never sees another
// thread's files. On failure the moves are undone.
func (p *Provider) attachSlot(threadID, slot string) error {
	if err := p.detachStale(threadID); err != nil {
		return err
	}
	base, dir := p.threadData(threadID), p.slotDir(slot)
	for _, d := range userDataDirs {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			return fmt.Errorf("thread directory: %w", err)
		}
	}
	var moved []string
	undo := func(err error) error {
		for _, d := range moved {
			if uerr := os.Rename(filepath.Join(dir, d), filepath.Join(base, d)); uerr != nil {
				err = errors.Join(err, fmt.Errorf("move %s back: %w", d, uerr))
			}
		}
		return err
	}
	for _, d := range userDataDirs {
		if err := os.Remove(filepath.Join(dir, d)); err != nil { // not empty: the slot was used
			return undo(fmt.Errorf("pool slot %s: placeholder %s: %w", slot, d, err))
		}
		if err := os.Rename(filepath.Join(base, d), filepath.Join(dir, d)); err != nil {
			return undo(fmt.Errorf("pool slot %s: move the thread's %s in: %w", slot, d, err))
		}
		moved = append(moved, d)
	}
	if err := os.Remove(base); err != nil {
		return undo(fmt.Errorf("pool slot %s: %w", slot, err))
	}
	if err := os.Symlink(dir, base); err != nil {
		return undo(errors.Join(fmt.Errorf("pool slot %s: %w", slot, err), os.Mkdir(base, 0o755)))
	}
	// Whoever destroys the sandbox later may know only its slot (the
	// backend's labels say nothing of the thread): the marker, outside
	// what the sandbox sees, says whose files these are.
	if err := os.WriteFile(p.slotMarker(slot), []byte(threadID), 0o600); err != nil {
		return undo(errors.Join(fmt.Errorf("pool slot %s: %w", slot, err), os.Remove(base), os.Mkdir(base, 0o755)))
	}
	return nil
}

func (p *Provider) slotMarker(slot string) string {
	return filepath.Join(p.o.Home, "pool", slot, "thread")
}

// slotOwnerFile names the owner id whose pool made the slot.
func (p *Provider) slotOwnerFile(slot string) string {
	return filepath.Join(p.o.Home, "pool", slot, "owner")
}

// detachSlot moves a destroyed pool sandbox's thread files back from its
// slot (if the thread's directory still points there) and removes the
// slot directory.
func (p *Provider) detachSlot(threadID, slot string) error {
	var errs []error
	if !driver.ValidID(slot) {
		return fmt.Errorf("pool slot %q: not a valid slot id", slot)
	}
	if b, err := os.ReadFile(p.slotMarker(slot)); err == nil && len(b) <= 64 {
		threadID = string(b)
	}
	if threadID != "" && driver.ValidID(threadID) {
		base, dir := p.threadData(threadID), p.slotDir(slot)
		if target, err := os.Readlink(base); err == nil && target == dir {
			errs = append(errs, os.Remove(base), os.Mkdir(base, 0o755))
			for _, d := range userDataDirs {
				if err := os.Rename(filepath.Join(dir, d), filepath.Join(base, d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fmt.Errorf("move the thread's %s back: %w", d, err))
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool slot %s: %w (its files stay in %s)", slot, err, p.slotDir(slot))
	}
	return p.removeSlot(slot)
}

// detachStale moves a thread's files back from the slot of a pool
// sandbox that is gone (its process died before destroying it), before
// the thread gets a new sandbox.
func (p *Provider) detachStale(threadID string) error {
	target, err := os.Readlink(p.threadData(threadID))
	if err != nil {
		return nil // a directory, or nothing yet
	}
	pool := filepath.Join(p.o.Home, "pool") + string(filepath.Separator)
	rel, ok := strings.CutPrefix(target, pool)
	slot, _, _ := strings.Cut(rel, string(filepath.Separator))
	if !ok || !driver.ValidID(slot) || target != p.slotDir(slot) {
		return fmt.Errorf("thread directory %s is a symlink to %s, not a pool slot: remove it", p.threadData(threadID), target)
	}
	return p.detachSlot(threadID, slot)
}
