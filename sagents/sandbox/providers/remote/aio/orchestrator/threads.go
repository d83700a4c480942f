package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// ThreadDir is the host directory of a thread's files
// (Home/threads/<id>); it outlives the thread's sandbox.
func (p *Provider) ThreadDir(threadID string) string {
	return filepath.Join(p.o.Home, "threads", threadID)
}

// ErrNoThread is returned (wrapped, matching fs.ErrNotExist) for a thread
// with no sandbox, no saved state and no directory.
var ErrNoThread = fmt.Errorf("aio: no sandbox, state or files for this thread: %w", fs.ErrNotExist)

// ThreadExists reports whether the thread has a running sandbox (in this
// deployment), saved state, or a directory.
func (p *Provider) ThreadExists(ctx context.Context, threadID string) (bool, error) {
	if !driver.ValidID(threadID) {
		return false, fmt.Errorf("aio: %w", &InvalidThreadError{ThreadID: threadID})
	}
	if _, err := os.Stat(p.ThreadDir(threadID)); err == nil {
		return true, nil
	}
	if _, ok, err := p.o.Store.Load(ctx, threadID); err != nil || ok {
		return ok, err
	}
	_, ok, err := p.o.Backend.Discover(ctx, SandboxIDFor(threadID))
	return ok, err
}

// PurgeThread releases the thread's sandbox (ReleaseThread) and, still
// under the thread's locks, removes its directory with the files the
// sandbox wrote. A thread that does not exist at all is an error
// matching ErrNoThread.
func (p *Provider) PurgeThread(ctx context.Context, threadID string) error {
	ok, err := p.ThreadExists(ctx, threadID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("aio: purge %s: %w", threadID, ErrNoThread)
	}
	return p.withThreadLocks(ctx, "purge", threadID, func(context.Context) error { return p.removeThreadDir(threadID) })
}

// removeThreadDir removes the thread's directory, the FileStore's lock
// file included: it is removed under that lock, and FileStore.Lock makes
// a locker that was waiting on the removed file take the lock again on
// the path's new one.
func (p *Provider) removeThreadDir(threadID string) error {
	if err := os.RemoveAll(p.ThreadDir(threadID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
