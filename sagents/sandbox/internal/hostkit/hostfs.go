package hostkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// HostFS implements the FS of the host drivers over host directories,
// through a PathMapper. Every access goes through os.Root, so neither ".."
// nor a symlink (even one swapped in during the call) can leave a mount.
// Local and passthrough providers embed it.
type HostFS struct {
	Mapper *PathMapper
	// Check, when set, runs before every operation (providers use it to
	// return ErrClosed after Close).
	Check func() error
	// Owner, when set, owns every file and directory HostFS creates
	// (WriteFile, its temporary file included, EnsureDirectory, the
	// parents they create, CopyFromHost), and a file WriteFile or
	// CopyFromHost replaces. Nil leaves ownership to the process.
	Owner *FileOwner
	// As, when set, runs each operation that creates files (WriteFile,
	// MkdirAll, CopyFromHost): a driver runs them as another file-system
	// uid (local mode's checkpoints, as root: the layered workspace takes
	// only the sandbox's uids).
	As func(func() error) error
}

// as runs f through As, when set, after Check: Check may start what the
// operation needs (local mode's session sandbox), which must run as this
// process, not as As's file-system uid.
func (h *HostFS) as(f func() error) error {
	if h.As == nil {
		return f()
	}
	if h.Check != nil {
		if err := h.Check(); err != nil {
			return err
		}
	}
	return h.As(f)
}

// FileOwner is a numeric host uid and gid.
type FileOwner struct{ UID, GID int }

// open resolves p and opens the root of its mount.
func (h *HostFS) open(ctx context.Context, op, p string, write bool) (*os.Root, Location, error) {
	if err := ctx.Err(); err != nil {
		return nil, Location{}, err
	}
	if h.Check != nil {
		if err := h.Check(); err != nil {
			return nil, Location{}, err
		}
	}
	loc, err := h.Mapper.Resolve(p)
	if err != nil {
		if pe, ok := err.(*fs.PathError); ok {
			pe.Op = op
		}
		return nil, loc, err
	}
	if write && loc.ReadOnly {
		return nil, loc, driver.NewPathError(op, p, driver.ErrReadOnly, loc.Mount)
	}
	root, err := os.OpenRoot(loc.Root)
	if err != nil {
		return nil, loc, fmt.Errorf("sandbox: %s %q: open mount %s: %w", op, p, loc.Mount, err)
	}
	if loc, err = confineDirs(root, op, loc); err != nil {
		root.Close()
		return nil, loc, err
	}
	return root, loc, nil
}

// MaxReadFileBytes bounds ReadFile: a larger file is an error, not a
// host process that reads gigabytes into memory.
const MaxReadFileBytes = 256 << 20

// ReadFile reads a whole regular file. Anything else (a FIFO the sandbox
// made to hang the reader, a device, a directory) is an error, and the
// open never blocks.
func (h *HostFS) ReadFile(ctx context.Context, p string) ([]byte, error) {
	root, loc, err := h.open(ctx, "read", p, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := openRegular(root, loc.Rel, os.O_RDONLY)
	if err != nil {
		return nil, mapFSError("read", loc, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxReadFileBytes+1))
	if err == nil && len(data) > MaxReadFileBytes {
		err = &fs.PathError{Op: "read", Path: loc.Rel, Err: fmt.Errorf("larger than %d bytes", MaxReadFileBytes)}
	}
	return data, mapFSError("read", loc, err)
}

// Open opens a regular file for streaming reads and returns what
// fstat says of it; the caller closes the reader. As with ReadFile,
// anything but a regular file is an error and the open never blocks.
func (h *HostFS) Open(ctx context.Context, p string) (io.ReadCloser, fs.FileInfo, error) {
	root, loc, err := h.open(ctx, "read", p, false)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, err := openRegular(root, loc.Rel, os.O_RDONLY)
	if err != nil {
		return nil, nil, mapFSError("read", loc, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, mapFSError("read", loc, err)
	}
	return f, fi, nil
}

var errNotRegular = errors.New("not a regular file")

// openRegular opens without blocking (O_NONBLOCK) and refuses anything but
// a regular file.
func openRegular(root *os.Root, rel string, flag int) (*os.File, error) {
	f, err := root.OpenFile(rel, flag|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: rel, Err: errNotRegular}
		if fi.IsDir() {
			err = &fs.PathError{Op: "open", Path: rel, Err: syscall.EISDIR}
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// WriteFile replaces a file atomically (temp file, fsync, rename) or
// appends to it. Missing parent directories are created.
func (h *HostFS) WriteFile(ctx context.Context, p string, data []byte, opts driver.WriteOptions) error {
	return h.as(func() error { return h.writeFile(ctx, p, data, opts) })
}

func (h *HostFS) writeFile(ctx context.Context, p string, data []byte, opts driver.WriteOptions) error {
	root, loc, err := h.open(ctx, "write", p, true)
	if err != nil {
		return err
	}
	defer root.Close()
	if loc.Rel == "." {
		return driver.NewPathError("write", p, driver.ErrBadPath, "is the root of a mount")
	}
	perm := fs.FileMode(opts.Perm)
	if perm == 0 {
		perm = 0o644
	}
	if dir := path.Dir(loc.Rel); dir != "." {
		if err := mkdirAll(root, dir, h.Owner); err != nil {
			return mapFSError("write", loc, err)
		}
	}
	if opts.Append {
		return mapFSError("write", loc, appendFile(root, loc.Rel, data, perm, h.Owner))
	}
	return mapFSError("write", loc, replaceFile(root, loc.Rel, data, perm, h.Owner))
}

// mkdirAll is root.MkdirAll that gives every directory it creates to
// owner (when set).
func mkdirAll(root *os.Root, rel string, owner *FileOwner) error {
	if owner == nil {
		return root.MkdirAll(rel, 0o755)
	}
	cur := ""
	for _, part := range strings.Split(path.Clean(rel), "/") {
		cur = path.Join(cur, part)
		if cur == "." {
			continue
		}
		err := root.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			// Lchown: the name is not followed if it was swapped for a
			// symlink in between.
			if err := root.Lchown(cur, owner.UID, owner.GID); err != nil {
				return err
			}
		case !errors.Is(err, fs.ErrExist):
			return err
		}
	}
	fi, err := root.Stat(rel)
	if err == nil && !fi.IsDir() {
		err = &fs.PathError{Op: "mkdir", Path: rel, Err: syscall.ENOTDIR}
	}
	return err
}

// chown gives f to owner (when set).
func chown(f *os.File, owner *FileOwner) error {
	if owner == nil {
		return nil
	}
	return f.Chown(owner.UID, owner.GID)
}

func appendFile(root *os.Root, rel string, data []byte, perm fs.FileMode, owner *FileOwner) error {
	flag := os.O_WRONLY | os.O_APPEND | syscall.O_NONBLOCK
	var f *os.File
	var err error
	created := false
	if owner == nil {
		f, err = root.OpenFile(rel, flag|os.O_CREATE, perm)
	} else {
		// Only a file made here is given to owner.
		if f, err = root.OpenFile(rel, flag|os.O_CREATE|os.O_EXCL, perm); err == nil {
			created = true
		} else if errors.Is(err, fs.ErrExist) {
			f, err = root.OpenFile(rel, flag, perm)
		}
	}
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return &fs.PathError{Op: "append", Path: rel, Err: errNotRegular}
	}
	if created {
		if err := chown(f, owner); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func replaceFile(root *os.Root, rel string, data []byte, perm fs.FileMode, owner *FileOwner) error {
	if fi, err := root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return &fs.PathError{Op: "write", Path: rel, Err: errors.New("is a directory")}
		}
		if fi.Mode().IsRegular() {
			perm = fi.Mode().Perm()
		}
	}
	tmp := path.Join(path.Dir(rel), driver.NewID("."+path.Base(rel)+".sage-tmp"))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	err = chown(f, owner)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}

// Stat describes p without following a final symlink. A path that
// escapes is an error.
func (h *HostFS) Stat(ctx context.Context, p string) (driver.FileInfo, error) {
	root, loc, err := h.open(ctx, "stat", p, false)
	if err != nil {
		return driver.FileInfo{}, err
	}
	defer root.Close()
	fi, err := root.Lstat(loc.Rel)
	if err != nil {
		return driver.FileInfo{}, mapFSError("stat", loc, err)
	}
	return fileInfo(loc.Virtual, fi), nil
}

// ReadDir lists at most max entries of a directory (max <= 0
// means DefaultMaxEntries), reading no more than max+1 of them, so that
// memory and time stay bounded however large the directory: the result
// is the first entries the directory yields, sorted by name, and
// truncated says there were more.
func (h *HostFS) ReadDir(ctx context.Context, p string, max int) ([]driver.FileInfo, bool, error) {
	if max <= 0 {
		max = driver.DefaultMaxEntries
	}
	root, loc, err := h.open(ctx, "list", p, false)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	entries, truncated, err := readDirLimit(ctx, root, loc.Rel, max)
	if err != nil {
		return nil, false, mapFSError("list", loc, err)
	}
	out := make([]driver.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		out = append(out, fileInfo(path.Join(loc.Virtual, e.Name()), fi))
	}
	return out, truncated, nil
}

// readDirLimit reads at most max entries (max >= 0) in batches, sorted by
// name; truncated says the directory holds more.
func readDirLimit(ctx context.Context, root *os.Root, rel string, max int) ([]fs.DirEntry, bool, error) {
	d, err := root.Open(rel)
	if err != nil {
		return nil, false, err
	}
	defer d.Close()
	var out []fs.DirEntry
	truncated := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		batch, err := d.ReadDir(min(256, max+1-len(out)))
		out = append(out, batch...)
		if len(out) > max {
			out, truncated = out[:max], true
			break
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, truncated, nil
}

func fileInfo(virtual string, fi fs.FileInfo) driver.FileInfo {
	return driver.FileInfo{
		Name: fi.Name(), Path: virtual, IsDir: fi.IsDir(),
		Symlink: fi.Mode()&fs.ModeSymlink != 0, Size: fi.Size(),
		Mode: fi.Mode().String(), ModTime: fi.ModTime(),
	}
}

// MkdirAll creates p and its parents.
func (h *HostFS) MkdirAll(ctx context.Context, p string) error {
	return h.as(func() error { return h.mkdirAll(ctx, p) })
}

func (h *HostFS) mkdirAll(ctx context.Context, p string) error {
	root, loc, err := h.open(ctx, "mkdir", p, true)
	if err != nil {
		return err
	}
	defer root.Close()
	return mapFSError("mkdir", loc, mkdirAll(root, loc.Rel, h.Owner))
}

// Remove removes a file or a directory tree. The root of a mount
// cannot be deleted; a missing path is fs.ErrNotExist.
func (h *HostFS) Remove(ctx context.Context, p string) error {
	root, loc, err := h.open(ctx, "delete", p, true)
	if err != nil {
		return err
	}
	defer root.Close()
	if loc.Rel == "." {
		return driver.NewPathError("delete", p, driver.ErrBadPath, "is the root of a mount")
	}
	if _, err := root.Lstat(loc.Rel); err != nil {
		return mapFSError("delete", loc, err)
	}
	return mapFSError("delete", loc, root.RemoveAll(loc.Rel))
}

// WorkspacePath is the workspace as commands see it.
func (h *HostFS) WorkspacePath() string { return h.Mapper.Workspace() }

// VolumeMounts lists the extra mounts.
func (h *HostFS) VolumeMounts() []driver.VolumeMount { return h.Mapper.Mounts() }

// ToHostPath maps a sandbox path to the host path behind it.
func (h *HostFS) ToHostPath(p string) (string, error) { return h.Mapper.ToHost(p) }

// ToVirtualPath maps a host path to the sandbox path that shows it.
func (h *HostFS) ToVirtualPath(p string) (string, error) { return h.Mapper.ToVirtual(p) }
