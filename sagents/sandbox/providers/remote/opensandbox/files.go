package opensandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// maxFileSize bounds ReadFile and the appends of WriteFile.
const maxFileSize = 64 << 20

// ReadFile downloads a file of the workspace.
func (s *osSandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	t, err := s.resolve(ctx, "read", p, false)
	if err != nil {
		return nil, err
	}
	switch {
	case t.info == nil:
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	case t.info.Type == "directory":
		// execd answers 200 and nothing for a directory.
		return nil, &fs.PathError{Op: "read", Path: p, Err: syscall.EISDIR}
	}
	b, err := s.execd.download(ctx, t.real, maxFileSize)
	return b, s.pathErr("read", p, s.gone(ctx, err))
}

// pathErr names the sandbox path in an error.
func (s *osSandbox) pathErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}

// WriteFile uploads data. It uploads to a temporary name beside the
// target (execd creates missing parent directories) and moves it onto
// the target: a reader sees the old file or the new one, never a part.
// execd refuses to move onto an existing path, so over an existing file
// or symlink the target is removed first and the move repeated: then a
// reader may for a moment find no file, but still never a partial one. A
// symlink at the target is replaced, never followed. Append downloads,
// appends and writes the whole again (not atomic against concurrent
// writers), following a symlink that stays inside the workspace.
func (s *osSandbox) WriteFile(ctx context.Context, p string, data []byte, opts driver.WriteOptions) error {
	if err := s.check(); err != nil {
		return err
	}
	t, err := s.resolve(ctx, "write", p, !opts.Append)
	if err != nil {
		return err
	}
	if t.real == s.realWS || (t.info != nil && t.info.Type == "directory") {
		return driver.NewPathError("write", p, driver.ErrBadPath, "is a directory")
	}
	perm := opts.Perm
	if perm == 0 {
		perm = 0o644
	}
	if opts.Append && t.info != nil {
		old, err := s.execd.download(ctx, t.real, maxFileSize)
		if err != nil && !isNotExist(err) {
			return s.pathErr("write", p, s.gone(ctx, err))
		}
		data = append(old, data...)
	}
	tmp := path.Join(path.Dir(t.real), ".sage-tmp-"+driver.NewID("w"))
	if err := s.execd.upload(ctx, tmp, data, perm); err != nil {
		return s.pathErr("write", p, s.gone(ctx, err))
	}
	exists := t.info != nil
	for try := 0; ; try++ {
		if exists {
			err = s.execd.RemoveDirs(ctx, t.real) // rm -rf: a symlink itself, never its target
		}
		if err == nil {
			if err = s.execd.move(ctx, tmp, t.real); err == nil {
				return nil
			}
		}
		// Moved onto a path that exists (execd's 500 "destination path
		// already exists"), perhaps made meanwhile: remove it and retry.
		infos, ierr := s.execd.info(ctx, t.real)
		fi, found := infos[t.real]
		if ierr != nil || !found || fi.Type == "directory" || try == 2 {
			break
		}
		exists = true
	}
	_ = s.execd.removeFiles(context.WithoutCancel(ctx), tmp)
	return s.pathErr("write", p, s.gone(ctx, err))
}

func isNotExist(err error) bool { return err != nil && errors.Is(err, fs.ErrNotExist) }

// fileExists says whether p exists (a dangling symlink inside counts).
func (s *osSandbox) fileExists(ctx context.Context, p string) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	t, err := s.resolve(ctx, "stat", p, true)
	if err != nil {
		return false, err
	}
	return t.info != nil, nil
}

// listDirectory lists the entries of a directory, sorted by name.
func (s *osSandbox) listDirectory(ctx context.Context, p string) ([]driver.FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	t, err := s.resolve(ctx, "list", p, false)
	if err != nil {
		return nil, err
	}
	if t.info == nil {
		return nil, &fs.PathError{Op: "list", Path: p, Err: fs.ErrNotExist}
	}
	list, err := s.execd.listDir(ctx, t.real, 1)
	if err != nil {
		return nil, s.pathErr("list", p, s.gone(ctx, err))
	}
	out := make([]driver.FileInfo, 0, len(list))
	for _, f := range list {
		out = append(out, s.fileInfo(f))
	}
	return out, nil
}

func (s *osSandbox) fileInfo(f fileInfo) driver.FileInfo {
	return driver.FileInfo{Name: path.Base(f.Path), Path: f.Path, IsDir: f.Type == "directory",
		Symlink: f.Type == "symlink", Size: f.Size, Mode: fmt.Sprintf("%04d", f.Mode), ModTime: f.ModifiedAt}
}

// ensureDirectory creates a directory and its parents (mode 0755 less
// the sandbox's umask; an existing directory keeps its mode).
func (s *osSandbox) ensureDirectory(ctx context.Context, p string) error {
	if err := s.check(); err != nil {
		return err
	}
	t, err := s.resolve(ctx, "mkdir", p, false)
	if err != nil {
		return err
	}
	if t.info != nil && t.info.Type == "directory" {
		return nil
	}
	// Mode 0: execd's mkdir -p without a chmod afterwards.
	return s.pathErr("mkdir", p, s.gone(ctx, s.execd.makeDirs(ctx, map[string]permission{t.real: {Mode: 0}})))
}

// deleteFile removes a file, a symlink (not its target) or a directory
// tree. The workspace itself cannot be deleted.
func (s *osSandbox) deleteFile(ctx context.Context, p string) error {
	if err := s.check(); err != nil {
		return err
	}
	t, err := s.resolve(ctx, "delete", p, true)
	if err != nil {
		return err
	}
	if t.real == s.realWS {
		return driver.NewPathError("delete", p, driver.ErrBadPath, "is the workspace")
	}
	if t.info == nil {
		return &fs.PathError{Op: "delete", Path: p, Err: fs.ErrNotExist}
	}
	// DELETE /directories is rm -rf: it removes a file or a symlink too
	// (DELETE /files follows symlinks and leaves a dangling one alone).
	return s.pathErr("delete", p, s.gone(ctx, s.execd.RemoveDirs(ctx, t.real)))
}

// FileTree lists p down to MaxDepth with one listing call.
func (s *osSandbox) FileTree(ctx context.Context, p string, opts driver.TreeOptions) (*driver.TreeNode, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	t, err := s.resolve(ctx, "tree", p, false)
	if err != nil {
		return nil, err
	}
	real := t.real
	// One level more than shown, to count what lies below MaxDepth.
	list, err := s.execd.listDir(ctx, real, opts.MaxDepth+1)
	if err != nil {
		return nil, s.pathErr("tree", p, s.gone(ctx, err))
	}
	root := &driver.TreeNode{Name: path.Base(path.Clean(p)), Path: real, IsDir: true}
	nodes := map[string]*driver.TreeNode{real: root}
	depth := map[string]int{real: 0}
	for i, f := range list {
		if i >= opts.MaxEntries {
			root.Truncated = true
			break
		}
		parent := nodes[path.Dir(f.Path)]
		name := path.Base(f.Path)
		if parent == nil || (!opts.Hidden && strings.HasPrefix(name, ".")) {
			continue
		}
		d := depth[path.Dir(f.Path)] + 1
		if d > opts.MaxDepth || len(parent.Children) >= opts.MaxItems {
			parent.Omitted++
			continue
		}
		n := &driver.TreeNode{Name: name, Path: f.Path, IsDir: f.Type == "directory"}
		if !n.IsDir {
			n.Size = f.Size
		}
		parent.Children = append(parent.Children, n)
		if n.IsDir {
			nodes[f.Path], depth[f.Path] = n, d
		}
	}
	return root, nil
}

// CopyFromHost uploads a host file or tree; symlinks are skipped.
func (s *osSandbox) CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts driver.CopyOptions) (driver.CopyResult, error) {
	var res driver.CopyResult
	if err := s.check(); err != nil {
		return res, err
	}
	t, err := s.resolve(ctx, "copy", sandboxPath, true)
	if err != nil {
		return res, err
	}
	dst := t.real
	err = hostkit.WalkCopy(ctx, hostPath, dst, opts.Ignore, &res, func(p, target string, d fs.DirEntry) error {
		switch {
		case d.IsDir():
			return s.execd.makeDirs(ctx, map[string]permission{target: {Mode: 755}})
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.Size() > maxFileSize {
				return fmt.Errorf("opensandbox: copy %s: larger than %d bytes", p, maxFileSize)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := s.execd.upload(ctx, target, b, uint32(fi.Mode().Perm())); err != nil {
				return err
			}
			res.Files++
			res.Bytes += int64(len(b))
		}
		return nil
	})
	return res, s.gone(ctx, err)
}
