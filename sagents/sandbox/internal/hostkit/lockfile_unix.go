//go:build unix

package hostkit

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// What a process killed with -9 leaves behind is found by its lock files.
// The files only one process uses (an anonymous sandbox's runtime
// directory, say) lie beside a lock file that the process holds locked
// (flock) from before they exist until after they are removed. A later
// process that can take such a lock knows its holder is gone, and removes
// the files, then the lock ([SweepLock]).

// LockFile makes the lock file path and locks it (flock, exclusive),
// held until [Unlock] or the process's end. It is made under a temporary
// name and renamed once locked, so a sweep never sees it unlocked. An
// existing path is an error (fs.ErrExist).
func LockFile(path string) (*os.File, error) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path))
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, &os.PathError{Op: "flock", Path: tmp, Err: err}
	}
	if _, err := os.Lstat(path); err == nil {
		f.Close()
		os.Remove(tmp)
		return nil, &os.PathError{Op: "lock", Path: path, Err: os.ErrExist}
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// Unlock removes the lock file path, then lets its lock f go: the files
// it guarded are gone already. A nil f is nothing to do.
func Unlock(f *os.File, path string) {
	if f == nil {
		return
	}
	os.Remove(path)
	f.Close()
}

// SweepLock is the sweep of one lock file: when no process holds it
// (this one's own locks count as held: flock conflicts between two opens
// of one file) and it is still the file at path (not removed, or replaced
// by a new one, since the caller listed it), remove removes what it
// guarded and then the lock file goes. A remove that fails keeps the
// lock, for a later sweep to try again. It says whether it removed.
func SweepLock(path string, remove func() error) bool {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // its process lives
	}
	held, err := f.Stat()
	if err != nil {
		return false
	}
	if now, err := os.Lstat(path); err != nil || !os.SameFile(held, now) {
		return false
	}
	if remove() != nil {
		return false
	}
	os.Remove(path)
	return true
}
