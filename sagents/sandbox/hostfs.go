package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
)

// HostFS implements the file methods of Handle over host directories,
// through a PathMapper. Every access goes through os.Root, so neither ".."
// nor a symlink (even one swapped in during the call) can leave a mount.
// Local and passthrough providers embed it.
type HostFS struct {
	Mapper *PathMapper
	// Check, when set, runs before every operation (providers use it to
	// return ErrClosed after Close).
	Check func() error
	// Owner, when set, owns every file and directory HostFS creates.
	Owner *FileOwner
}

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
		err.(*PathError).Op = op
		return nil, loc, err
	}
	if write && loc.ReadOnly {
		return nil, loc, &PathError{Op: op, Path: p, Reason: "read-only mount " + loc.Mount}
	}
	root, err := os.OpenRoot(loc.Root)
	if err != nil {
		return nil, loc, fmt.Errorf("sandbox: %s %q: open mount %s: %w", op, p, loc.Mount, err)
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
func (h *HostFS) WriteFile(ctx context.Context, p string, data []byte, opts WriteOptions) error {
	root, loc, err := h.open(ctx, "write", p, true)
	if err != nil {
		return err
	}
	defer root.Close()
	if loc.Rel == "." {
		return &PathError{Op: "write", Path: p, Reason: "is the root of a mount"}
	}
	perm := fs.FileMode(opts.Perm)
	if perm == 0 {
		perm = 0o644
	}
	if dir := path.Dir(loc.Rel); dir != "." {
		if err := h.Owner.mkdirAll(root, dir, 0o755); err != nil {
			return mapFSError("write", loc, err)
		}
	}
	if opts.Append {
		return mapFSError("write", loc, appendFile(root, loc.Rel, data, perm, h.Owner))
	}
	return mapFSError("write", loc, replaceFile(root, loc.Rel, data, perm, h.Owner))
}

func appendFile(root *os.Root, rel string, data []byte, perm fs.FileMode, owner *FileOwner) error {
	_, statErr := root.Lstat(rel)
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, perm)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return &fs.PathError{Op: "append", Path: rel, Err: errNotRegular}
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := owner.chownFile(f); err != nil {
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
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+".sage-tmp-"+randomHex(6))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	err = owner.chownFile(f)
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

// FileExists reports whether p exists. A path that escapes is an error,
// not false.
func (h *HostFS) FileExists(ctx context.Context, p string) (bool, error) {
	root, loc, err := h.open(ctx, "stat", p, false)
	if err != nil {
		return false, err
	}
	defer root.Close()
	_, err = root.Lstat(loc.Rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, mapFSError("stat", loc, err)
}

// ListDirectory lists a directory, sorted by name. Symlinks are reported,
// not followed.
func (h *HostFS) ListDirectory(ctx context.Context, p string) ([]FileInfo, error) {
	root, loc, err := h.open(ctx, "list", p, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	entries, err := readDir(root, loc.Rel)
	if err != nil {
		return nil, mapFSError("list", loc, err)
	}
	out := make([]FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		out = append(out, fileInfo(path.Join(loc.Virtual, e.Name()), fi))
	}
	return out, nil
}

func readDir(root *os.Root, rel string) ([]fs.DirEntry, error) {
	d, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries, err
}

func fileInfo(virtual string, fi fs.FileInfo) FileInfo {
	return FileInfo{
		Name: fi.Name(), Path: virtual, IsDir: fi.IsDir(),
		Symlink: fi.Mode()&fs.ModeSymlink != 0, Size: fi.Size(),
		Mode: fi.Mode().String(), ModTime: fi.ModTime(),
	}
}

// EnsureDirectory creates p and its parents.
func (h *HostFS) EnsureDirectory(ctx context.Context, p string) error {
	root, loc, err := h.open(ctx, "mkdir", p, true)
	if err != nil {
		return err
	}
	defer root.Close()
	return mapFSError("mkdir", loc, h.Owner.mkdirAll(root, loc.Rel, 0o755))
}

// DeleteFile removes a file or a directory tree. The root of a mount
// cannot be deleted; a missing path is fs.ErrNotExist.
func (h *HostFS) DeleteFile(ctx context.Context, p string) error {
	root, loc, err := h.open(ctx, "delete", p, true)
	if err != nil {
		return err
	}
	defer root.Close()
	if loc.Rel == "." {
		return &PathError{Op: "delete", Path: p, Reason: "is the root of a mount"}
	}
	if _, err := root.Lstat(loc.Rel); err != nil {
		return mapFSError("delete", loc, err)
	}
	return mapFSError("delete", loc, root.RemoveAll(loc.Rel))
}

// FileTree walks p down to opts.MaxDepth.
func (h *HostFS) FileTree(ctx context.Context, p string, opts TreeOptions) (*TreeNode, error) {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 3
	}
	if opts.MaxItems <= 0 {
		opts.MaxItems = 100
	}
	root, loc, err := h.open(ctx, "tree", p, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(loc.Rel)
	if err != nil {
		return nil, mapFSError("tree", loc, err)
	}
	node := &TreeNode{Name: path.Base(loc.Virtual), Path: loc.Virtual, IsDir: fi.IsDir(), Size: fi.Size()}
	if fi.IsDir() {
		if err := fillTree(ctx, root, loc.Rel, node, 1, opts); err != nil {
			return nil, mapFSError("tree", loc, err)
		}
	}
	return node, nil
}

func fillTree(ctx context.Context, root *os.Root, rel string, node *TreeNode, depth int, opts TreeOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := readDir(root, rel)
	if err != nil {
		return err
	}
	node.Size = 0
	for _, e := range entries {
		if !opts.Hidden && strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if depth > opts.MaxDepth || len(node.Children) >= opts.MaxItems {
			node.Omitted++
			continue
		}
		child := &TreeNode{Name: e.Name(), Path: path.Join(node.Path, e.Name()), IsDir: e.IsDir()}
		if fi, err := e.Info(); err == nil {
			child.Size = fi.Size()
		}
		node.Children = append(node.Children, child)
		if e.IsDir() {
			if err := fillTree(ctx, root, path.Join(rel, e.Name()), child, depth+1, opts); err != nil {
				return err
			}
		}
	}
	return nil
}

// String renders the tree, one entry a line, directories with a slash.
func (n *TreeNode) String() string {
	var b strings.Builder
	n.render(&b, "")
	return b.String()
}

func (n *TreeNode) render(b *strings.Builder, indent string) {
	b.WriteString(indent + n.Name)
	if n.IsDir {
		b.WriteString("/")
	}
	b.WriteString("\n")
	for _, c := range n.Children {
		c.render(b, indent+"  ")
	}
	if n.Omitted > 0 {
		fmt.Fprintf(b, "%s  ... %d more\n", indent, n.Omitted)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

// WorkspacePath is the workspace as commands see it.
func (h *HostFS) WorkspacePath() string { return h.Mapper.Workspace() }

// VolumeMounts lists the extra mounts.
func (h *HostFS) VolumeMounts() []VolumeMount { return h.Mapper.Mounts() }

// ToHostPath maps a sandbox path to the host path behind it.
func (h *HostFS) ToHostPath(p string) (string, error) { return h.Mapper.ToHost(p) }

// ToVirtualPath maps a host path to the sandbox path that shows it.
func (h *HostFS) ToVirtualPath(p string) (string, error) { return h.Mapper.ToVirtual(p) }
