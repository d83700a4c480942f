package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// CopyFromHost copies a host file or directory tree to a sandbox path.
// Entries matching opts.Ignore are left out; symlinks in the source are
// not followed and are listed in the result instead.
func (h *HostFS) CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts CopyOptions) (CopyResult, error) {
	var res CopyResult
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
	c := copier{ctx: ctx, root: root, src: src, dst: loc.Rel, ignore: opts.Ignore, res: &res, owner: h.Owner}
	err = filepath.WalkDir(src, c.visit)
	return res, mapFSError("copy", loc, err)
}

type copier struct {
	ctx      context.Context
	root     *os.Root
	src, dst string
	ignore   []string
	res      *CopyResult
	owner    *FileOwner
}

func (c *copier) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	rel, err := filepath.Rel(c.src, p)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	if rel != "." && c.ignored(rel) {
		c.res.Ignored++
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	}
	target := path.Join(c.dst, rel)
	switch {
	case d.Type()&fs.ModeSymlink != 0:
		c.res.SkippedSymlinks = append(c.res.SkippedSymlinks, rel)
	case d.IsDir():
		if err := mkdirAll(c.root, target, c.owner); err != nil {
			return err
		}
		c.res.Dirs++
	case d.Type().IsRegular():
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
	}
	return nil
}

func (c *copier) ignored(rel string) bool {
	base := path.Base(rel)
	for _, pat := range c.ignore {
		if ok, _ := path.Match(pat, base); ok {
			return true
		}
		if ok, _ := path.Match(pat, rel); ok {
			return true
		}
	}
	return false
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
