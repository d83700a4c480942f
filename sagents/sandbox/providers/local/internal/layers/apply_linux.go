//go:build linux

package layers

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// Owner, when set, owns what Apply and Copy create (sage as root); nil
// keeps the process's own uid.
type Owner struct{ UID, GID int }

// Copy copies the tree src into the directory dst (bytes, modes,
// symlinks, directories, FIFOs; devices and sockets are skipped), replacing
// what is at each path. Both trees are reached through os.Root: no symlink
// in either is followed.
func Copy(dst, src string, own *Owner) error { return walkWith(dst, src, own, false) }

// Mirror makes the directory dst hold what src holds: Copy, leaving what
// already matches (type, size, mode and modification time; a symlink's
// target) untouched and removing what src lacks. It writes back a
// workspace's live state into its folder.
func Mirror(dst, src string, own *Owner) error { return walkWith(dst, src, own, true) }

func walkWith(dst, src string, own *Owner, mirror bool) error {
	d, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer d.Close()
	s, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer s.Close()
	w := walker{d: d, s: s, own: own, mirror: mirror}
	return w.dir(".")
}

type walker struct {
	d, s   *os.Root
	own    *Owner
	mirror bool
}

func (w *walker) dir(rel string) error {
	f, err := w.s.Open(rel)
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := w.entry(path.Join(rel, e.Name())); err != nil {
			return err
		}
	}
	if !w.mirror {
		return nil
	}
	have := make(map[string]bool, len(ents))
	for _, e := range ents {
		have[e.Name()] = true
	}
	d, err := w.d.Open(rel)
	if err != nil {
		return err
	}
	dents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, e := range dents {
		if !have[e.Name()] {
			if err := w.d.RemoveAll(path.Join(rel, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// same says whether dst's rel already is src's fi (Mirror).
func (w *walker) same(rel string, fi, dfi fs.FileInfo) bool {
	if fi.Mode() != dfi.Mode() {
		return false
	}
	switch {
	case fi.Mode().IsRegular():
		return fi.Size() == dfi.Size() && fi.ModTime().Equal(dfi.ModTime())
	case fi.Mode()&fs.ModeSymlink != 0:
		a, err1 := w.s.Readlink(rel)
		b, err2 := w.d.Readlink(rel)
		return err1 == nil && err2 == nil && a == b
	}
	return false
}

func (w *walker) entry(rel string) error {
	fi, err := w.s.Lstat(rel)
	if err != nil {
		return err
	}
	mode := fi.Mode()
	dfi, derr := w.d.Lstat(rel)
	if mode.IsDir() {
		if derr == nil && !dfi.IsDir() {
			if err := w.d.RemoveAll(rel); err != nil {
				return err
			}
			derr = fs.ErrNotExist
		}
		if derr != nil {
			if err := w.d.Mkdir(rel, 0o700); err != nil {
				return err
			}
		}
		if err := w.dir(rel); err != nil {
			return err
		}
		return w.attrs(rel, fi)
	}
	if derr == nil && w.mirror && w.same(rel, fi, dfi) {
		return nil
	}
	if derr == nil {
		if err := w.d.RemoveAll(rel); err != nil {
			return err
		}
	}
	switch {
	case mode.IsRegular():
		if err := w.copyFile(rel, fi); err != nil {
			return err
		}
	case mode&fs.ModeSymlink != 0:
		target, err := w.s.Readlink(rel)
		if err != nil {
			return err
		}
		if err := w.d.Symlink(target, rel); err != nil {
			return err
		}
		if w.own != nil {
			return w.d.Lchown(rel, w.own.UID, w.own.GID)
		}
		return nil
	case mode&fs.ModeNamedPipe != 0:
		if err := w.mkfifo(rel); err != nil {
			return err
		}
	default: // devices, sockets: nothing a workspace keeps
		return nil
	}
	return w.attrs(rel, fi)
}

func (w *walker) copyFile(rel string, fi fs.FileInfo) error {
	in, err := w.s.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := w.d.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *walker) mkfifo(rel string) error {
	dir, err := w.d.Open(path.Dir(rel))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := unix.Mkfifoat(int(dir.Fd()), path.Base(rel), 0o600); err != nil {
		return &fs.PathError{Op: "mkfifo", Path: rel, Err: err}
	}
	return nil
}

// attrs gives rel the mode (setuid, setgid and sticky bits included) and
// the modification time of fi, and the owner.
func (w *walker) attrs(rel string, fi fs.FileInfo) error {
	if w.own != nil {
		if err := w.d.Lchown(rel, w.own.UID, w.own.GID); err != nil {
			return err
		}
	}
	if err := w.d.Chmod(rel, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	if err := w.d.Chtimes(rel, fi.ModTime(), fi.ModTime()); err != nil && !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("layers: times of %s: %w", rel, err)
	}
	return nil
}
