package sandboxtest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

func testFiles(t *testing.T, o Options) {
	h := open(t, o)
	c := ctx(t)
	t.Run("write read append", func(t *testing.T) {
		require.NoError(t, h.WriteFile(c, "a/b/file.txt", []byte("one\n"), driver.WriteOptions{}))
		require.NoError(t, h.WriteFile(c, "a/b/file.txt", []byte("two\n"), driver.WriteOptions{Append: true}))
		got, err := h.ReadFile(c, "a/b/file.txt")
		require.NoError(t, err)
		assert.Equal(t, "one\ntwo\n", string(got))
		require.NoError(t, h.WriteFile(c, "a/b/file.txt", []byte("new"), driver.WriteOptions{}))
		got, err = h.ReadFile(c, path.Join(h.WorkspacePath(), "a/b/file.txt"))
		require.NoError(t, err)
		assert.Equal(t, "new", string(got))
		res := run(t, h, "cat a/b/file.txt", driver.ExecOptions{})
		assert.Equal(t, "new", res.Stdout, "commands see what the file API wrote")
	})
	t.Run("overwrite", func(t *testing.T) {
		require.NoError(t, h.WriteFile(c, "over.txt", []byte("a long first version\n"), driver.WriteOptions{}))
		require.NoError(t, h.WriteFile(c, "over.txt", []byte("short"), driver.WriteOptions{}), "writing an existing file again")
		got, err := h.ReadFile(c, "over.txt")
		require.NoError(t, err)
		assert.Equal(t, "short", string(got), "the new content, nothing of the old")
		require.NoError(t, h.WriteFile(c, "over.txt", []byte("+more"), driver.WriteOptions{Append: true}))
		got, err = h.ReadFile(c, "over.txt")
		require.NoError(t, err)
		assert.Equal(t, "short+more", string(got))
		require.NoError(t, h.EnsureDirectory(c, "over.d"))
		assert.Error(t, h.WriteFile(c, "over.d", []byte("x"), driver.WriteOptions{}), "a directory is not replaced by a file")
		list, err := h.ListDirectory(c, "over.d")
		require.NoError(t, err, "the directory is still there")
		assert.Empty(t, list)
	})
	t.Run("copy from host", func(t *testing.T) { testCopyFromHost(t, h, c) })
	t.Run("binary content", func(t *testing.T) {
		data := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
		require.NoError(t, h.WriteFile(c, "bin.dat", data, driver.WriteOptions{}))
		got, err := h.ReadFile(c, "bin.dat")
		require.NoError(t, err)
		assert.Equal(t, data, got)
	})
	t.Run("odd names", func(t *testing.T) {
		for _, name := range []string{"with space.txt", `quote"s'.txt`, "new\nline.txt", "ünï—cødé ✓.txt", "-dash.txt", "$(touch pwned).txt"} {
			require.NoError(t, h.WriteFile(c, name, []byte(name), driver.WriteOptions{}), name)
			got, err := h.ReadFile(c, name)
			require.NoError(t, err, name)
			assert.Equal(t, name, string(got))
			ok, err := h.FileExists(c, name)
			require.NoError(t, err)
			assert.True(t, ok, name)
		}
		ok, err := h.FileExists(c, "pwned")
		require.NoError(t, err)
		assert.False(t, ok, "a file name was executed")
	})
	t.Run("exists and missing", func(t *testing.T) {
		ok, err := h.FileExists(c, "nope.txt")
		require.NoError(t, err)
		assert.False(t, ok)
		_, err = h.ReadFile(c, "nope.txt")
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorIs(t, h.DeleteFile(c, "nope.txt"), fs.ErrNotExist)
		_, err = h.ListDirectory(c, "nope")
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("list ensure delete", func(t *testing.T) {
		require.NoError(t, h.EnsureDirectory(c, "d/e/f"))
		require.NoError(t, h.EnsureDirectory(c, "d/e/f"), "EnsureDirectory is idempotent")
		require.NoError(t, h.WriteFile(c, "d/x.txt", []byte("12345"), driver.WriteOptions{}))
		list, err := h.ListDirectory(c, "d")
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "e", list[0].Name)
		assert.True(t, list[0].IsDir)
		assert.Equal(t, path.Join(h.WorkspacePath(), "d/x.txt"), list[1].Path)
		assert.EqualValues(t, 5, list[1].Size)
		require.NoError(t, h.DeleteFile(c, "d"))
		ok, err := h.FileExists(c, "d/x.txt")
		require.NoError(t, err)
		assert.False(t, ok)
	})
	t.Run("tree", func(t *testing.T) {
		require.NoError(t, h.EnsureDirectory(c, "t/a/b/c"))
		require.NoError(t, h.WriteFile(c, "t/.hidden", nil, driver.WriteOptions{}))
		for _, n := range []string{"1", "2", "3", "4"} {
			require.NoError(t, h.WriteFile(c, "t/f"+n, nil, driver.WriteOptions{}))
		}
		tree, err := h.FileTree(c, "t", driver.TreeOptions{MaxDepth: 2, MaxItems: 3})
		require.NoError(t, err)
		assert.Equal(t, "t", tree.Name)
		require.Len(t, tree.Children, 3)
		assert.Equal(t, 2, tree.Omitted)
		assert.Equal(t, "a", tree.Children[0].Name)
		require.Len(t, tree.Children[0].Children, 1, "depth 2 lists b")
		assert.Empty(t, tree.Children[0].Children[0].Children, "depth 3 is not listed")
		tree, err = h.FileTree(c, "t", driver.TreeOptions{Hidden: true, MaxItems: 10})
		require.NoError(t, err)
		assert.Equal(t, ".hidden", tree.Children[0].Name)
	})
}

func testEscapes(t *testing.T, o Options) {
	h := open(t, o)
	c := ctx(t)
	res := run(t, h, "ln -s /etc/passwd link_out && ln -s / root_link && mkdir -p in && ln -s in in_link", driver.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	cases := []struct {
		name string
		op   func(context.Context) error
	}{
		{"read ..", func(c context.Context) error { _, err := h.ReadFile(c, "../../../etc/passwd"); return err }},
		{"read absolute outside", func(c context.Context) error { _, err := h.ReadFile(c, "/etc/passwd"); return err }},
		{"read symlink out", func(c context.Context) error { _, err := h.ReadFile(c, "link_out"); return err }},
		{"read through dir symlink", func(c context.Context) error { _, err := h.ReadFile(c, "root_link/etc/passwd"); return err }},
		{"write ..", func(c context.Context) error {
			return h.WriteFile(c, "../escape.txt", []byte("x"), driver.WriteOptions{})
		}},
		{"write through dir symlink", func(c context.Context) error {
			return h.WriteFile(c, "root_link/tmp/escape.txt", []byte("x"), driver.WriteOptions{})
		}},
		{"list outside", func(c context.Context) error { _, err := h.ListDirectory(c, "/"); return err }},
		{"list through symlink", func(c context.Context) error { _, err := h.ListDirectory(c, "root_link"); return err }},
		{"mkdir outside", func(c context.Context) error { return h.EnsureDirectory(c, "/escape-dir") }},
		{"delete the workspace", func(c context.Context) error { return h.DeleteFile(c, h.WorkspacePath()) }},
		{"delete outside", func(c context.Context) error { return h.DeleteFile(c, "../x") }},
		{"exec workdir outside", func(c context.Context) error {
			_, err := h.ExecuteCommand(c, "true", driver.ExecOptions{Workdir: "/"})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.op(c), fs.ErrPermission)
		})
	}
	t.Run("symlink inside stays usable", func(t *testing.T) {
		require.NoError(t, h.WriteFile(c, "in/ok.txt", []byte("ok"), driver.WriteOptions{}))
		got, err := h.ReadFile(c, "in_link/ok.txt")
		require.NoError(t, err)
		assert.Equal(t, "ok", string(got))
	})
	t.Run("overwrite replaces a symlink, not its target", func(t *testing.T) {
		require.NoError(t, h.WriteFile(c, "link_out", []byte("mine"), driver.WriteOptions{}))
		got, err := h.ReadFile(c, "link_out")
		require.NoError(t, err)
		assert.Equal(t, "mine", string(got))
	})
}

// testCopyFromHost copies a host tree with an ignored file and a symlink:
// every mode walks it the same way (hostkit.WalkCopy). A mode without the
// capability must say ErrUnsupported.
func testCopyFromHost(t *testing.T, h *sandbox.Sandbox, c context.Context) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("aa"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "sub", "b.txt"), []byte("bbb"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "skip.log"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "link")))
	res, err := h.CopyFromHost(c, src, "copied", driver.CopyOptions{Ignore: []string{"*.log"}})
	if errors.Is(err, driver.ErrUnsupported) {
		return
	}
	require.NoError(t, err)
	assert.Equal(t, 2, res.Files)
	assert.Equal(t, 2, res.Dirs, "the copy's root and sub")
	assert.Equal(t, int64(5), res.Bytes)
	assert.Equal(t, 1, res.Ignored)
	assert.Equal(t, []string{"link"}, res.SkippedSymlinks)
	got, err := h.ReadFile(c, "copied/sub/b.txt")
	require.NoError(t, err)
	assert.Equal(t, "bbb", string(got))
	for _, name := range []string{"copied/skip.log", "copied/link"} {
		ok, err := h.FileExists(c, name)
		require.NoError(t, err)
		assert.False(t, ok, name)
	}
}
