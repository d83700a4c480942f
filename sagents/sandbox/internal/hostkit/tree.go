package hostkit

import (
	"context"
	"os"
	"path"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// FileTree walks p down to opts.MaxDepth, reading at most
// opts.MaxEntries directory entries in all.
func (h *HostFS) FileTree(ctx context.Context, p string, opts driver.TreeOptions) (*driver.TreeNode, error) {
	opts = opts.WithDefaults()
	root, loc, err := h.open(ctx, "tree", p, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(loc.Rel)
	if err != nil {
		return nil, mapFSError("tree", loc, err)
	}
	node := &driver.TreeNode{Name: path.Base(loc.Virtual), Path: loc.Virtual, IsDir: fi.IsDir(), Size: fi.Size()}
	if fi.IsDir() {
		w := &treeWalk{ctx: ctx, root: root, opts: opts, budget: opts.MaxEntries}
		if err := w.fill(loc.Rel, node, 1); err != nil {
			return nil, mapFSError("tree", loc, err)
		}
		node.Truncated = w.truncated
	}
	return node, nil
}

// treeWalk is one FileTree walk and its remaining entry budget.
type treeWalk struct {
	ctx       context.Context
	root      *os.Root
	opts      driver.TreeOptions
	budget    int
	truncated bool
}

func (w *treeWalk) fill(rel string, node *driver.TreeNode, depth int) error {
	ctx, root, opts := w.ctx, w.root, w.opts
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, more, err := readDirLimit(ctx, root, rel, w.budget)
	if err != nil {
		return err
	}
	w.budget -= len(entries)
	w.truncated = w.truncated || more
	node.Size = 0
	for _, e := range entries {
		if !opts.Hidden && strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if depth > opts.MaxDepth || len(node.Children) >= opts.MaxItems {
			node.Omitted++
			continue
		}
		child := &driver.TreeNode{Name: e.Name(), Path: path.Join(node.Path, e.Name()), IsDir: e.IsDir()}
		if fi, err := e.Info(); err == nil {
			child.Size = fi.Size()
		}
		node.Children = append(node.Children, child)
		if e.IsDir() {
			if err := w.fill(path.Join(rel, e.Name()), child, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
