package hostkit

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// fastTempDir is a temporary directory on tmpfs when /dev/shm is one
// (creating 300k entries on a busy disk takes a minute), else on disk.
func fastTempDir(t *testing.T) string {
	t.Helper()
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) == nil && st.Type == 0x01021994 { // TMPFS_MAGIC
		d, err := os.MkdirTemp("/dev/shm", "sage-test-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostFSListDirectoryLimitIsBounded lists a directory of 300k entries:
// the bounded listing stops at the cap, says so, and allocates a small
// fraction of what the full listing (the control) does.
func TestHostFSListDirectoryLimitIsBounded(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	n := 300000
	if testing.Short() {
		n = 30000
	}
	dir := fastTempDir(t)
	testenv.MakeEntries(t, dir, n)
	mapper, err := NewPathMapper("/workspace", m.ws, []driver.VolumeMount{{HostPath: dir, SandboxPath: "/workspace/big"}})
	require.NoError(t, err)
	h.Mapper = mapper

	var list []driver.FileInfo
	var truncated bool
	bounded := allocated(func() { list, truncated, err = h.ReadDir(ctx, "big", 1000) })
	require.NoError(t, err)
	assert.True(t, truncated)
	assert.Len(t, list, 1000)
	for i := 1; i < len(list); i++ {
		require.Less(t, list[i-1].Name, list[i].Name, "sorted by name")
	}
	t.Logf("allocated: %d KiB for a 1000-entry cap over %d entries (the whole listing takes ~150 MiB)", bounded>>10, n)
	assert.Less(t, bounded, uint64(8<<20), "a capped listing must not read the whole directory")

	// Under the cap: everything, not truncated.
	require.NoError(t, os.Mkdir(filepath.Join(m.ws, "small"), 0o755))
	testenv.MakeEntries(t, filepath.Join(m.ws, "small"), 999)
	list, truncated, err = h.ReadDir(ctx, "small", 1000)
	require.NoError(t, err)
	assert.False(t, truncated, "control: a directory under the cap is whole")
	assert.Len(t, list, 999)
}

func TestHostFSFileTreeMaxEntries(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	for _, d := range []string{"t/a", "t/b", "t/c"} {
		require.NoError(t, os.MkdirAll(filepath.Join(m.ws, d), 0o755))
		testenv.MakeEntries(t, filepath.Join(m.ws, d), 50)
	}
	tree, err := h.FileTree(ctx, "t", driver.TreeOptions{MaxEntries: 60, MaxItems: 1000})
	require.NoError(t, err)
	assert.True(t, tree.Truncated)
	assert.Contains(t, tree.String(), "truncated")
	n := 0
	var count func(*driver.TreeNode)
	count = func(x *driver.TreeNode) {
		for _, c := range x.Children {
			n++
			count(c)
		}
	}
	count(tree)
	assert.LessOrEqual(t, n, 60)

	tree, err = h.FileTree(ctx, "t", driver.TreeOptions{MaxItems: 1000}) // default: 10000 entries
	require.NoError(t, err)
	assert.False(t, tree.Truncated, "control: a tree under the limit is whole")
	assert.NotContains(t, tree.String(), "truncated")
}

// TestTreeStringEscapesNames: names made inside the sandbox with terminal
// escape sequences are printed escaped; plain names unchanged.
func TestTreeStringEscapesNames(t *testing.T) {
	h, m := hostFS(t)
	evil := []string{"\x1b[2Jcleared", "car\rriage", "new\nline", "bell\x07", "bad\xff\xfe", "ctl\x01x"}
	require.NoError(t, os.Mkdir(filepath.Join(m.ws, "e"), 0o755))
	for _, n := range append(evil, "plain.txt") {
		require.NoError(t, os.WriteFile(filepath.Join(m.ws, "e", n), nil, 0o644))
	}
	tree, err := h.FileTree(context.Background(), "e", driver.TreeOptions{})
	require.NoError(t, err)
	out := tree.String()
	assert.Contains(t, out, "\n  plain.txt\n", "plain names print unchanged")
	assert.Contains(t, out, `$'\033''[2Jcleared'`)
	for _, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Fatalf("raw control character %U in %q", r, out)
		}
	}
	assert.NotContains(t, out, "\xff")
	assert.Equal(t, len(evil)+2, strings.Count(out, "\n"), "one line per entry: %q", out)
}

func TestHostFSOpenFile(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 100000)
	require.NoError(t, os.WriteFile(filepath.Join(m.ws, "f.bin"), data, 0o644))
	rc, fi, err := h.Open(ctx, "f.bin")
	require.NoError(t, err)
	assert.EqualValues(t, len(data), fi.Size())
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, data, got)

	_, _, err = h.Open(ctx, "../outside/secret")
	assert.ErrorIs(t, err, os.ErrPermission)
	_, _, err = h.Open(ctx, "nested")
	assert.ErrorIs(t, err, syscall.EISDIR)
	require.NoError(t, syscall.Mkfifo(m.ws+"/trap", 0o644))
	done := make(chan error, 1)
	go func() { _, _, err := h.Open(ctx, "trap"); done <- err }()
	select {
	case err := <-done:
		assert.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("OpenFile blocked on a FIFO")
	}
}

// TestHostFSOwner gives everything HostFS creates to an unused uid; the
// control (Owner nil) leaves files to root.
func TestHostFSOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("SAGE_TEST_ALLOW_SKIP") == "1" {
			t.Skip("needs root (chown)")
		}
		t.Fatal("TestHostFSOwner needs root to chown; set SAGE_TEST_ALLOW_SKIP=1 to skip")
	}
	const uid, gid = 2000000099, 2000000098
	h, m := hostFS(t)
	ctx := context.Background()
	h.Owner = &FileOwner{UID: uid, GID: gid}
	require.NoError(t, os.WriteFile(filepath.Join(m.ws, "existing"), []byte("old"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(m.ws, "appended"), []byte("old"), 0o600))
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "sub", "c.txt"), []byte("c"), 0o644))

	require.NoError(t, h.WriteFile(ctx, "p/q/new.txt", []byte("x"), driver.WriteOptions{}))
	require.NoError(t, h.WriteFile(ctx, "existing", []byte("new"), driver.WriteOptions{}))
	require.NoError(t, h.WriteFile(ctx, "r/log", []byte("a"), driver.WriteOptions{Append: true}))
	require.NoError(t, h.WriteFile(ctx, "appended", []byte("more"), driver.WriteOptions{Append: true}))
	require.NoError(t, h.MkdirAll(ctx, "d1/d2"))
	_, err := h.CopyFromHost(ctx, src, "copied", driver.CopyOptions{})
	require.NoError(t, err)

	owned := func(rel string) (int, int) {
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(filepath.Join(m.ws, rel), &st), rel)
		return int(st.Uid), int(st.Gid)
	}
	for _, rel := range []string{"p", "p/q", "p/q/new.txt", "existing", "r", "r/log", "d1", "d1/d2",
		"copied", "copied/sub", "copied/sub/c.txt"} {
		u, g := owned(rel)
		assert.Equal(t, uid, u, rel)
		assert.Equal(t, gid, g, rel)
	}
	u, _ := owned("appended")
	assert.Equal(t, 0, u, "appending to an existing file keeps its owner")
	u, _ = owned(".")
	assert.Equal(t, 0, u, "existing parents keep their owner")
	b, err := os.ReadFile(filepath.Join(m.ws, "existing"))
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
	entries, err := os.ReadDir(m.ws)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), ".sage-tmp-", "temporary file left behind")
	}

	h.Owner = nil // control
	require.NoError(t, h.WriteFile(ctx, "s/plain.txt", []byte("x"), driver.WriteOptions{}))
	u, _ = owned("s/plain.txt")
	assert.Equal(t, 0, u)
	u, _ = owned("s")
	assert.Equal(t, 0, u)
}
