package aiodriver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

// ReadFile downloads the file (GET /v1/file/download), so binary content
// survives; /v1/file/read is for text only.
func (h *Handle) ReadFile(ctx context.Context, p string) ([]byte, error) {
	v, err := h.resolve("read", p)
	if err != nil {
		return nil, err
	}
	return h.c.Download(ctx, v, 0)
}

// WriteFile writes through POST /v1/file/write with base64 content.
// opts.Perm is not transmitted (the API has no mode).
func (h *Handle) WriteFile(ctx context.Context, p string, data []byte, opts driver.WriteOptions) error {
	v, err := h.resolve("write", p)
	if err != nil {
		return err
	}
	if v == h.ws {
		return driver.NewPathError("write", p, driver.ErrBadPath, "is the workspace")
	}
	return h.writeBytes(ctx, v, data, opts.Append)
}

func (h *Handle) writeBytes(ctx context.Context, v string, data []byte, appendTo bool) error {
	_, err := h.c.WriteFile(ctx, aioapi.FileWriteRequest{File: v, Content: base64.StdEncoding.EncodeToString(data),
		Encoding: aioapi.EncodingBase64, Append: appendTo})
	return err
}

// Open downloads the file whole (the API does not stream) and reads it
// from memory.
func (h *Handle) Open(ctx context.Context, p string) (io.ReadCloser, fs.FileInfo, error) {
	b, err := h.ReadFile(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil, nil
}

// Stat looks the name up in its parent's listing (POST /v1/file/list).
func (h *Handle) Stat(ctx context.Context, p string) (driver.FileInfo, error) {
	v, err := h.resolve("stat", p)
	if err != nil {
		return driver.FileInfo{}, err
	}
	if v == h.ws {
		return driver.FileInfo{Name: path.Base(v), Path: v, IsDir: true}, nil
	}
	list, truncated, err := h.list(ctx, path.Dir(v))
	if isNotDir(err) {
		err = &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	if err != nil {
		return driver.FileInfo{}, err
	}
	name := path.Base(v)
	for _, f := range list {
		if f.Name == name {
			return f, nil
		}
	}
	if truncated {
		return driver.FileInfo{}, fmt.Errorf("aio: stat %q: the server cut the listing of %s at its entry limit, so absence cannot be told", p, path.Dir(v))
	}
	return driver.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
}

func isNotDir(err error) bool {
	var ae *aioapi.APIError
	return errors.As(err, &ae) && ae.File != nil && ae.File.ErrorType == aioapi.ErrTypeNotDirectory
}

// ReadDir lists through POST /v1/file/list, sorted by name, cut to max
// entries (max <= 0 means driver.DefaultMaxEntries); truncated says the
// directory holds more, by the cut or by the server's own limit (sage
// sandboxd bounds listings). Symlinks cannot be told apart (the API has
// no such field).
func (h *Handle) ReadDir(ctx context.Context, p string, max int) ([]driver.FileInfo, bool, error) {
	if max <= 0 {
		max = driver.DefaultMaxEntries
	}
	v, err := h.resolve("list", p)
	if err != nil {
		return nil, false, err
	}
	list, truncated, err := h.list(ctx, v)
	if err != nil {
		return nil, false, err
	}
	if len(list) > max {
		list, truncated = list[:max], true
	}
	return list, truncated, nil
}

func (h *Handle) list(ctx context.Context, v string) ([]driver.FileInfo, bool, error) {
	yes := true
	res, err := h.c.ListFiles(ctx, aioapi.FileListRequest{Path: v, ShowHidden: &yes, IncludeSize: &yes,
		IncludePermissions: &yes, SortBy: "name"})
	if err != nil {
		return nil, false, err
	}
	out := make([]driver.FileInfo, 0, len(res.Files))
	for _, f := range res.Files {
		fi := driver.FileInfo{Name: f.Name, Path: path.Join(v, f.Name), IsDir: f.IsDirectory,
			Mode: deref(f.Permissions)}
		if f.Size != nil {
			fi.Size = *f.Size
		}
		if f.ModifiedTime != nil {
			fi.ModTime, _ = time.Parse(time.RFC3339Nano, *f.ModifiedTime)
		}
		out = append(out, fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, res.Truncated, nil
}

// Exit codes of the file scripts below.
const (
	scriptEscapes  = 3
	scriptNotExist = 4
)

// mkdirScript creates $2 after checking that its nearest existing
// ancestor, symlinks resolved, is inside the workspace $1.
const mkdirScript = `a=$2
while [ ! -e "$a" ] && [ ! -L "$a" ]; do a=${a%/*}; [ -n "$a" ] || a=/; done
r=$(cd -P -- "$a" && pwd -P) || exit 5
w=$(cd -P -- "$1" && pwd -P) || exit 5
case "$r/" in "$w"/*) ;; *) echo "escapes the workspace" >&2; exit 3;; esac
exec mkdir -p -- "$2"`

// rmScript removes $3 in directory $2 after checking that $2, symlinks
// resolved, is inside the workspace $1; the entry itself is not followed.
const rmScript = `w=$(cd -P -- "$1" && pwd -P) || exit 5
cd -P -- "$2" 2>/dev/null || exit 4
case "$(pwd -P)/" in "$w"/*) ;; *) echo "escapes the workspace" >&2; exit 3;; esac
[ -e "./$3" ] || [ -L "./$3" ] || exit 4
exec rm -rf -- "./$3"`

// MkdirAll runs mkdir -p through the shell API (the file API has
// no mkdir), with every path passed as a quoted argument.
func (h *Handle) MkdirAll(ctx context.Context, p string) error {
	v, err := h.resolve("mkdir", p)
	if err != nil {
		return err
	}
	return h.script(ctx, "mkdir", p, mkdirScript, h.ws, v)
}

// Remove runs rm -rf through the shell API (the file API has no
// delete), refusing the workspace itself and anything whose parent
// resolves outside it.
func (h *Handle) Remove(ctx context.Context, p string) error {
	v, err := h.resolve("delete", p)
	if err != nil {
		return err
	}
	if v == h.ws {
		return driver.NewPathError("delete", p, driver.ErrBadPath, "is the workspace")
	}
	return h.script(ctx, "delete", p, rmScript, h.ws, path.Dir(v), path.Base(v))
}

func (h *Handle) script(ctx context.Context, op, p, body string, args ...string) error {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	cmd := "set -- " + strings.Join(quoted, " ") + "\n" + body
	res, err := h.run(ctx, &execPlan{command: cmd, dir: h.ws, timeout: h.timeout, limit: 64 << 10})
	if err != nil {
		return err
	}
	switch {
	case res.Success:
		return nil
	case res.ExitCode == scriptEscapes:
		return driver.NewPathError(op, p, driver.ErrEscape, "escapes the workspace (through a symlink)")
	case res.ExitCode == scriptNotExist:
		return &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
	}
	return fmt.Errorf("aio: %s %q: exit %d: %s", op, p, res.ExitCode, strings.TrimSpace(res.Stderr))
}

// FileTree walks p with one /v1/file/list call per directory, with the
// same depth and item rules as the host providers.
func (h *Handle) FileTree(ctx context.Context, p string, opts driver.TreeOptions) (*driver.TreeNode, error) {
	opts = opts.WithDefaults()
	v, err := h.resolve("tree", p)
	if err != nil {
		return nil, err
	}
	node := &driver.TreeNode{Name: path.Base(v), Path: v, IsDir: true}
	w := &remoteTree{h: h, opts: opts, budget: opts.MaxEntries}
	if err := w.fill(ctx, node, 1); err != nil {
		if !isNotDir(err) {
			return nil, err
		}
		return h.fileNode(ctx, v)
	}
	node.Truncated = w.truncated
	return node, nil
}

// fileNode describes a tree root that is not a directory.
func (h *Handle) fileNode(ctx context.Context, v string) (*driver.TreeNode, error) {
	list, _, err := h.list(ctx, path.Dir(v))
	if err != nil {
		return nil, err
	}
	for _, f := range list {
		if f.Name == path.Base(v) {
			return &driver.TreeNode{Name: f.Name, Path: v, Size: f.Size}, nil
		}
	}
	return nil, &fs.PathError{Op: "tree", Path: v, Err: fs.ErrNotExist}
}

// remoteTree is one FileTree walk and its remaining entry budget.
type remoteTree struct {
	h         *Handle
	opts      driver.TreeOptions
	budget    int
	truncated bool
}

func (w *remoteTree) fill(ctx context.Context, node *driver.TreeNode, depth int) error {
	opts := w.opts
	if w.budget <= 0 {
		w.truncated = true
		return nil
	}
	entries, more, err := w.h.list(ctx, node.Path)
	if err != nil {
		return err
	}
	if len(entries) > w.budget {
		entries, more = entries[:w.budget], true
	}
	w.budget -= len(entries)
	w.truncated = w.truncated || more
	for _, e := range entries {
		if !opts.Hidden && strings.HasPrefix(e.Name, ".") {
			continue
		}
		if depth > opts.MaxDepth || len(node.Children) >= opts.MaxItems {
			node.Omitted++
			continue
		}
		child := &driver.TreeNode{Name: e.Name, Path: e.Path, IsDir: e.IsDir, Size: e.Size}
		node.Children = append(node.Children, child)
		if e.IsDir {
			if err := w.fill(ctx, child, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// CopyFromHost uploads a host file or tree (POST /v1/file/upload per
// file, mkdir per directory). Symlinks in the source are skipped and
// listed.
func (h *Handle) CopyFromHost(ctx context.Context, hostPath, sandboxPath string, opts driver.CopyOptions) (driver.CopyResult, error) {
	var res driver.CopyResult
	for _, pat := range opts.Ignore {
		if _, err := path.Match(pat, ""); err != nil {
			return res, fmt.Errorf("aio: copy: ignore pattern %q: %w", pat, err)
		}
	}
	dst, err := h.resolve("copy", sandboxPath)
	if err != nil {
		return res, err
	}
	src, err := filepath.Abs(hostPath)
	if err != nil {
		return res, fmt.Errorf("aio: copy: %w", err)
	}
	err = hostkit.WalkCopy(ctx, src, dst, opts.Ignore, &res, func(p, target string, d fs.DirEntry) error {
		return h.copyEntry(ctx, p, target, d, &res)
	})
	if err != nil {
		return res, fmt.Errorf("aio: copy %s: %w", hostPath, err)
	}
	return res, nil
}

// copyEntry makes a directory or uploads a regular file of a copy.
func (h *Handle) copyEntry(ctx context.Context, p, target string, d fs.DirEntry, res *driver.CopyResult) error {
	if d.IsDir() {
		return h.MkdirAll(ctx, target)
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	up, err := h.c.Upload(ctx, target, f)
	if err != nil {
		return err
	}
	res.Files++
	res.Bytes += up.FileSize
	return nil
}
