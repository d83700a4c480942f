package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

var (
	_ Leaser  = (*FileStore)(nil)
	_ Counter = (*FileStore)(nil)
)

// leaseFile is DIR/leases/<owner>.lock: its owner holds a flock on it for
// as long as it lives, and the kernel drops the flock when it dies, kill
// -9 included. A lease file nobody holds is a dead owner's.
func (s *FileStore) leaseFile(owner string) (string, error) {
	if !driver.ValidID(owner) {
		return "", fmt.Errorf("aio: owner id %q: want 1-64 characters of A-Z a-z 0-9 _ -", owner)
	}
	return filepath.Join(s.dir, "leases", owner+".lock"), nil
}

// GrantLease takes the flock of owner's lease file. The lease never
// expires: it ends when the process releases it or dies.
func (s *FileStore) GrantLease(_ context.Context, owner string) (*Lease, error) {
	p, err := s.leaseFile(owner)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("aio: owner lease: %w", err)
	}
	fl := flock.New(p, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("aio: owner lease %s: %w", owner, err)
	}
	if !ok {
		_ = fl.Close()
		return nil, fmt.Errorf("aio: owner lease %s: another live process holds it (fix: give each process its own owner id)", owner)
	}
	l := NewLease(owner, 0, time.Now(), 0, func() {
		_ = os.Remove(p) // while still locked: nobody takes a dying lease
		_ = fl.Close()
	})
	l.crashed = func() { _ = fl.Close() }
	return l, nil
}

// LiveLeases tries each owner's flock: one it can take is a dead
// owner's, whose lock file becomes its tombstone there and then
// (DIR/leases/<owner>.gone), so that later sweeps still know it for
// dead. An owner with neither file is left out: it never had a lease in
// this directory (another home's), or it released its lease when it
// shut down (nothing of it is left to collect: what it kept it
// disowned). Tombstones older than tombstoneAge are removed: a dead
// owner's leftovers are collected by the first sweep after its death.
func (s *FileStore) LiveLeases(_ context.Context, owners []string) (map[string]bool, error) {
	out := make(map[string]bool, len(owners))
	for _, o := range owners {
		p, err := s.leaseFile(o)
		if err != nil {
			continue
		}
		tomb := strings.TrimSuffix(p, ".lock") + ".gone"
		fl := flock.New(p, flock.SetFlag(os.O_RDWR))
		ok, err := fl.TryLock()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if st, err := os.Stat(tomb); err == nil {
				if time.Since(st.ModTime()) > tombstoneAge {
					_ = os.Remove(tomb)
				}
				out[o] = false
			}
		case err != nil:
			return nil, fmt.Errorf("aio: owner lease %s: %w", o, err)
		case ok:
			if err := os.Rename(p, tomb); err != nil {
				_ = os.Remove(p)
			} else {
				now := time.Now() // its age counts from the death seen, not the grant
				_ = os.Chtimes(tomb, now, now)
			}
			_ = fl.Close()
			out[o] = false
		default:
			_ = fl.Close()
			out[o] = true
		}
	}
	return out, nil
}

// tombstoneAge is how long a dead owner's tombstone is kept.
const tombstoneAge = 24 * time.Hour

// LeaseTTL is 0: a flock ends exactly with its holder.
func (s *FileStore) LeaseTTL() time.Duration { return 0 }

// counterFile holds the reservations (id -> owner) under the flock of
// counterLock.
func (s *FileStore) counterFile() string { return filepath.Join(s.dir, "sandboxes.json") }

// withCounter runs f on the reservations under their flock and saves
// them when f reports a change.
func (s *FileStore) withCounter(ctx context.Context, f func(map[string]string) (bool, error)) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("aio: sandbox count: %w", err)
	}
	fl := flock.New(filepath.Join(s.dir, "sandboxes.lock"), flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	ok, err := fl.TryLockContext(ctx, s.poll)
	if err != nil || !ok {
		return fmt.Errorf("aio: sandbox count: lock: %w", errors.Join(err, ctx.Err()))
	}
	defer fl.Close()
	m := map[string]string{}
	data, err := os.ReadFile(s.counterFile())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("aio: sandbox count: %w", err)
	}
	if len(data) > 0 && json.Unmarshal(data, &m) != nil {
		s.logger.Warn("aio: sandbox count file unreadable; starting it again", "path", s.counterFile())
		m = map[string]string{}
	}
	changed, err := f(m)
	if err != nil || !changed {
		return err
	}
	data, err = json.Marshal(m)
	if err != nil {
		return fmt.Errorf("aio: sandbox count: %w", err)
	}
	if err := writeAtomic(s.dir, "sandboxes.json", data); err != nil {
		return fmt.Errorf("aio: sandbox count: %w", err)
	}
	return nil
}

// Reserve counts id under the count's flock.
func (s *FileStore) Reserve(ctx context.Context, id, owner string, max int) error {
	return s.withCounter(ctx, func(m map[string]string) (bool, error) {
		if _, ok := m[id]; !ok && max > 0 && len(m) >= max {
			return false, fmt.Errorf("%w: %d of %d counted (release one, or raise max_sandboxes)", ErrTooManySandboxes, len(m), max)
		}
		m[id] = owner
		return true, nil
	})
}

// Unreserve stops counting id.
func (s *FileStore) Unreserve(ctx context.Context, id, owner string) error {
	return s.withCounter(ctx, func(m map[string]string) (bool, error) {
		o, ok := m[id]
		if !ok || owner != "" && o != owner {
			return false, nil
		}
		delete(m, id)
		return true, nil
	})
}

// Reserved lists the reservations.
func (s *FileStore) Reserved(ctx context.Context) (map[string]string, error) {
	var out map[string]string
	err := s.withCounter(ctx, func(m map[string]string) (bool, error) {
		out = m
		return false, nil
	})
	return out, err
}
