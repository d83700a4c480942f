package hostkit

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// CopyFromHost copies a host file or directory tree to a sandbox path.
// Entries matching opts.Ignore are left out; symlinks in the source are
// not followed and are listed in the result instead.
func (h *HostFS) CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts driver.CopyOptions) (res driver.CopyResult, err error) {
	err = h.as(func() error {
		res, err = h.copyFromHost(ctx, hostPath, sandboxPath, opts)
		return err
	})
	return res, err
}

func (h *HostFS) copyFromHost(ctx context.Context, hostPath, sandboxPath string, opts driver.CopyOptions) (driver.CopyResult, error) {
	var res driver.CopyResult
	for _, pat := range opts.Ignore {
		if _, err := path.Match(pat, ""); err != nil {
			return res, fmt.Errorf("sandbox: copy: ignore pattern %q: %w", pat, err)
		}
	}
	src, err := filepath.Abs(hostPath)
	if err != nil {
		return res, fmt.Errorf("sandbox: copy: %w", err)
	}
	if _, err := os.Lstat(src); err != nil {
		return res, fmt.Errorf("sandbox: copy: %w", err)
	}
	root, loc, err := h.open(ctx, "copy", sandboxPath, true)
	if err != nil {
		return res, err
	}
	defer root.Close()
	c := copier{root: root, owner: h.Owner, res: &res}
	err = WalkCopy(ctx, src, loc.Rel, opts.Ignore, &res, c.visit)
	return res, mapFSError("copy", loc, err)
}

// WalkCopy walks the host tree src for a copy to dst in a sandbox, the
// part every mode's CopyFromHost shares: an entry whose base name or
// slash path below src matches an ignore pattern is counted in
// res.Ignored and skipped (a directory with all it holds); a symlink is
// listed in res.SkippedSymlinks and not followed; other special files are
// left out. visit gets each directory and regular file with its target,
// dst joined with the slash path below src; a directory visit returns
// nil is counted in res.Dirs (files are counted by visit, which knows
// their size). ctx is checked before every entry.
func WalkCopy(ctx context.Context, src, dst string, ignore []string, res *driver.CopyResult,
	visit func(hostPath, target string, d fs.DirEntry) error) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." && copyIgnored(ignore, rel) {
			res.Ignored++
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := path.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			res.SkippedSymlinks = append(res.SkippedSymlinks, rel)
		case d.IsDir():
			if err := visit(p, target, d); err != nil {
				return err
			}
			res.Dirs++
		case d.Type().IsRegular():
			return visit(p, target, d)
		}
		return nil
	})
}

// copyIgnored reports whether an ignore pattern matches rel's base name
// or rel itself.
func copyIgnored(patterns []string, rel string) bool {
	base := path.Base(rel)
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, base); ok {
			return true
		}
		if ok, _ := path.Match(pat, rel); ok {
			return true
		}
	}
	return false
}

type copier struct {
	root  *os.Root
	owner *FileOwner
	res   *driver.CopyResult
}

func (c *copier) visit(p, target string, d fs.DirEntry) error {
	if d.IsDir() {
		return mkdirAll(c.root, target, c.owner)
	}
	if target == "." {
		return fmt.Errorf("sandbox: copy: cannot replace the root of a mount with a file")
	}
	if dir := path.Dir(target); dir != "." {
		if err := mkdirAll(c.root, dir, c.owner); err != nil {
			return err
		}
	}
	n, err := c.copyFile(p, target, d)
	if err != nil {
		return err
	}
	c.res.Files++
	c.res.Bytes += n
	return nil
}

func (c *copier) copyFile(src, target string, d fs.DirEntry) (int64, error) {
	perm := fs.FileMode(0o644)
	if fi, err := d.Info(); err == nil {
		perm = fi.Mode().Perm()
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := c.root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return 0, err
	}
	if err := chown(out, c.owner); err != nil {
		out.Close()
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
