package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
)

// FileOwner is the host uid and gid that files made through a HostFS
// belong to. Local mode sets it when sage runs as root: sandboxed
// processes run as the session's own uid, and what the host side writes
// for them must be theirs too.
type FileOwner struct{ UID, GID int }

// chown gives rel to the owner (no-op without one); symlinks are never
// followed.
func (o *FileOwner) chown(root *os.Root, rel string) error {
	if o == nil {
		return nil
	}
	return root.Lchown(rel, o.UID, o.GID)
}

// chownFile gives an open file to the owner.
func (o *FileOwner) chownFile(f *os.File) error {
	if o == nil {
		return nil
	}
	return f.Chown(o.UID, o.GID)
}

// mkdirAll is root.MkdirAll that gives every directory it creates to the
// owner.
func (o *FileOwner) mkdirAll(root *os.Root, dir string, perm fs.FileMode) error {
	if o == nil {
		return root.MkdirAll(dir, perm)
	}
	if dir == "." || dir == "" {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(path.Clean(dir), "/") {
		cur = path.Join(cur, part)
		err := root.Mkdir(cur, perm)
		switch {
		case err == nil:
			if err := o.chown(root, cur); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			fi, serr := root.Stat(cur) // a symlink out of the root fails here, as in MkdirAll
			if serr != nil {
				return serr
			}
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: cur, Err: errors.New("not a directory")}
			}
		default:
			return err
		}
	}
	return nil
}
