package sessiond

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often a held lock is tried again.
const lockPoll = 20 * time.Millisecond

// lock takes the session's lock file (flock, exclusive), waiting for it
// until ctx ends. The file may be removed by a daemon that ends, so the
// one locked is checked to still be the one at the path.
func lock(ctx context.Context, dir string) (*os.File, error) {
	p := filepath.Join(dir, lockName)
	for {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err != unix.EWOULDBLOCK && err != unix.EINTR {
				break
			}
			select {
			case <-ctx.Done():
				f.Close()
				return nil, fmt.Errorf("%s: still locked by another sage: %w", p, ctx.Err())
			case <-time.After(lockPoll):
			}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if sameFile(f, p) {
			return f, nil
		}
		f.Close() // removed or replaced while we waited: lock the new one
	}
}

func sameFile(f *os.File, p string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(p)
	if err1 != nil || err2 != nil {
		return false
	}
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// unlock releases a lock taken by lock; remove also removes the file,
// while still holding it (a daemon that ends).
func unlock(f *os.File, remove bool) {
	if remove {
		os.Remove(f.Name())
	}
	f.Close()
}
