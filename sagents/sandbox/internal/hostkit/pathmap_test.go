package hostkit

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

type testMounts struct {
	ws, data, out string
	pm            *PathMapper
}

func newTestMounts(t *testing.T) testMounts {
	t.Helper()
	base := t.TempDir()
	m := testMounts{ws: filepath.Join(base, "ws"), data: filepath.Join(base, "data"), out: filepath.Join(base, "outside")}
	for _, d := range []string{m.ws, m.data, m.out, filepath.Join(m.ws, "nested")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(m.out, "secret"), []byte("secret"), 0o644))
	var err error
	m.pm, err = NewPathMapper("/workspace", m.ws, []driver.VolumeMount{
		{HostPath: m.data, SandboxPath: "/mnt/data", ReadOnly: true},
		{HostPath: m.out, SandboxPath: "/workspace/nested/out"}, // nested: longest prefix wins
	})
	require.NoError(t, err)
	return m
}

func TestResolve(t *testing.T) {
	m := newTestMounts(t)
	cases := []struct {
		in, host, rel, mount string
		ro                   bool
	}{
		{"", m.ws, ".", "/workspace", false},
		{".", m.ws, ".", "/workspace", false},
		{"a.txt", m.ws + "/a.txt", "a.txt", "/workspace", false},
		{"/workspace/a/b", m.ws + "/a/b", "a/b", "/workspace", false},
		{"a/../b", m.ws + "/b", "b", "/workspace", false},
		{"/workspace//x/./y/", m.ws + "/x/y", "x/y", "/workspace", false},
		{"/mnt/data/f", m.data + "/f", "f", "/mnt/data", true},
		{"/mnt/data", m.data, ".", "/mnt/data", true},
		{"nested/out/secret", m.out + "/secret", "secret", "/workspace/nested/out", false},
		{"nested/outside", m.ws + "/nested/outside", "nested/outside", "/workspace", false},
		{"with space/quote\"s/new\nline/ünï", m.ws + "/with space/quote\"s/new\nline/ünï", "with space/quote\"s/new\nline/ünï", "/workspace", false},
	}
	for _, tc := range cases {
		loc, err := m.pm.Resolve(tc.in)
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.host, loc.Host, "%q", tc.in)
		assert.Equal(t, tc.rel, loc.Rel, "%q", tc.in)
		assert.Equal(t, tc.mount, loc.Mount, "%q", tc.in)
		assert.Equal(t, tc.ro, loc.ReadOnly, "%q", tc.in)
	}
}

func TestResolveEscapes(t *testing.T) {
	m := newTestMounts(t)
	for _, in := range []string{"..", "../x", "a/../../x", "/etc/passwd", "/", "/workspacex", "/mnt", "/mnt/datax/f", "nul\x00byte"} {
		_, err := m.pm.Resolve(in)
		assert.ErrorIs(t, err, fs.ErrPermission, "%q", in)
		var pe *fs.PathError
		assert.True(t, errors.As(err, &pe), "%q", in)
		if in != "nul\x00byte" {
			assert.ErrorIs(t, err, driver.ErrEscape, "%q", in)
		}
	}
}

func TestToVirtual(t *testing.T) {
	m := newTestMounts(t)
	for host, want := range map[string]string{
		m.ws: "/workspace", m.ws + "/a/b": "/workspace/a/b", m.data + "/f": "/mnt/data/f",
		m.out + "/secret": "/workspace/nested/out/secret",
	} {
		got, err := m.pm.ToVirtual(host)
		require.NoError(t, err, host)
		assert.Equal(t, want, got)
	}
	for _, bad := range []string{"relative", "/etc", m.ws + "x", filepath.Dir(m.ws)} {
		_, err := m.pm.ToVirtual(bad)
		assert.ErrorIs(t, err, fs.ErrPermission, bad)
	}
}

func TestNewPathMapperErrors(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		virtual string
		mounts  []driver.VolumeMount
	}{
		{"relative", nil},
		{"/", nil},
		{"/workspace", []driver.VolumeMount{{HostPath: ws, SandboxPath: "/workspace"}}},
		{"/workspace", []driver.VolumeMount{{HostPath: ws + "/missing", SandboxPath: "/m"}}},
		{"/workspace", []driver.VolumeMount{{HostPath: ws, SandboxPath: "/m/../x"}}},
	} {
		_, err := NewPathMapper(tc.virtual, ws, tc.mounts)
		assert.Error(t, err, "%+v", tc)
	}
}

func hostFS(t *testing.T) (*HostFS, testMounts) {
	m := newTestMounts(t)
	return &HostFS{Mapper: m.pm}, m
}

func TestHostFSEscapes(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	require.NoError(t, os.Symlink(m.out+"/secret", m.ws+"/abs_link"))
	require.NoError(t, os.Symlink("../outside/secret", m.ws+"/rel_link"))
	require.NoError(t, os.Symlink(m.out, m.ws+"/dir_link"))
	require.NoError(t, os.Symlink("nested", m.ws+"/inside_link"))
	for _, p := range []string{"abs_link", "rel_link", "dir_link/secret", "../outside/secret", "/etc/hostname"} {
		_, err := h.ReadFile(ctx, p)
		assert.ErrorIs(t, err, fs.ErrPermission, "read %q", p)
		assert.ErrorIs(t, err, driver.ErrEscape, "read %q", p)
	}
	for _, p := range []string{"dir_link/x", "dir_link/sub/x", "../outside/x", "/etc/x"} {
		err := h.WriteFile(ctx, p, []byte("x"), driver.WriteOptions{})
		assert.ErrorIs(t, err, fs.ErrPermission, "write %q", p)
	}
	err := h.WriteFile(ctx, "dir_link/new.txt", []byte("x"), driver.WriteOptions{Append: true})
	assert.ErrorIs(t, err, fs.ErrPermission)
	_, err = os.Stat(m.out + "/new.txt")
	assert.ErrorIs(t, err, fs.ErrNotExist, "append through a symlink created a file outside")
	_, _, err = h.ReadDir(ctx, "dir_link", 0)
	assert.ErrorIs(t, err, fs.ErrPermission)
	tree, err := h.FileTree(ctx, "/workspace", driver.TreeOptions{})
	require.NoError(t, err)
	for _, c := range tree.Children {
		assert.Empty(t, c.Children, "tree followed a symlink: %s", c.Name)
	}
	_, err = h.CopyFromHost(ctx, m.data, "dir_link/copy", driver.CopyOptions{})
	assert.ErrorIs(t, err, fs.ErrPermission)
	require.NoError(t, h.WriteFile(ctx, "nested/ok", []byte("ok"), driver.WriteOptions{}))
	got, err := h.ReadFile(ctx, "inside_link/ok")
	require.NoError(t, err)
	assert.Equal(t, "ok", string(got))
	b, _ := os.ReadFile(m.out + "/secret")
	assert.Equal(t, "secret", string(b), "outside file changed")
}

func TestHostFSReadOnlyMount(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	require.NoError(t, os.WriteFile(m.data+"/f", []byte("ro"), 0o644))
	got, err := h.ReadFile(ctx, "/mnt/data/f")
	require.NoError(t, err)
	assert.Equal(t, "ro", string(got))
	for name, err := range map[string]error{
		"write":  h.WriteFile(ctx, "/mnt/data/f", []byte("x"), driver.WriteOptions{}),
		"append": h.WriteFile(ctx, "/mnt/data/f", []byte("x"), driver.WriteOptions{Append: true}),
		"mkdir":  h.MkdirAll(ctx, "/mnt/data/d"),
		"delete": h.Remove(ctx, "/mnt/data/f"),
		"copy":   func() error { _, err := h.CopyFromHost(ctx, m.out, "/mnt/data/c", driver.CopyOptions{}); return err }(),
	} {
		assert.ErrorIs(t, err, fs.ErrPermission, name)
		assert.ErrorContains(t, err, "read-only", name)
		assert.ErrorIs(t, err, driver.ErrReadOnly, name)
	}
}

// TestHostFSSymlinkRace swaps a file for a symlink to the outside while
// readers and writers hammer it: no read may return the secret and no
// write may land outside.
func TestHostFSSymlinkRace(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	target := m.ws + "/victim"
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			os.Remove(target)
			if i%2 == 0 {
				os.WriteFile(target, []byte("inside"), 0o644)
			} else {
				os.Symlink(m.out+"/secret", target)
			}
		}
	})
	for range 2000 {
		if b, err := h.ReadFile(ctx, "victim"); err == nil {
			require.NotEqual(t, "secret", string(b), "read through a swapped-in symlink")
		}
		h.WriteFile(ctx, "victim", []byte("written"), driver.WriteOptions{Append: true})
	}
	stop.Store(true)
	wg.Wait()
	b, err := os.ReadFile(m.out + "/secret")
	require.NoError(t, err)
	assert.Equal(t, "secret", string(b), "a write went through a swapped-in symlink")
}

func TestHostFSWriteIsAtomicAndKeepsMode(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	require.NoError(t, os.WriteFile(m.ws+"/run.sh", []byte("old"), 0o755))
	require.NoError(t, h.WriteFile(ctx, "run.sh", []byte("new"), driver.WriteOptions{}))
	fi, err := os.Stat(m.ws + "/run.sh")
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
	entries, _ := os.ReadDir(m.ws)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "sage-tmp", "temp file left behind")
	}
	require.NoError(t, os.Mkdir(m.ws+"/adir", 0o755))
	assert.Error(t, h.WriteFile(ctx, "adir", []byte("x"), driver.WriteOptions{}))
	assert.Error(t, h.WriteFile(ctx, "/workspace", []byte("x"), driver.WriteOptions{}))
	entries, _ = os.ReadDir(m.ws)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "sage-tmp", "temp file left behind after a failed write")
	}
}

func TestCopyFromHost(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	src := t.TempDir()
	for p, body := range map[string]string{"a.txt": "a", "sub/b.txt": "bb", "node_modules/x.js": "x", "sub/skip.pyc": "p", ".git/HEAD": "h"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, p), []byte(body), 0o644))
	}
	require.NoError(t, os.Symlink("/etc/passwd", src+"/link"))
	res, err := h.CopyFromHost(ctx, src, "proj", driver.CopyOptions{Ignore: []string{"node_modules", "*.pyc", ".git"}})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Files)
	assert.EqualValues(t, 3, res.Bytes)
	assert.Equal(t, 3, res.Ignored)
	assert.Equal(t, []string{"link"}, res.SkippedSymlinks)
	b, err := os.ReadFile(m.ws + "/proj/sub/b.txt")
	require.NoError(t, err)
	assert.Equal(t, "bb", string(b))
	_, err = os.Stat(m.ws + "/proj/node_modules")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = h.CopyFromHost(ctx, src, "proj", driver.CopyOptions{Ignore: []string{"[bad"}})
	assert.ErrorContains(t, err, "[bad")
	_, err = h.CopyFromHost(ctx, src+"/missing", "proj", driver.CopyOptions{})
	assert.ErrorIs(t, err, fs.ErrNotExist)
	res, err = h.CopyFromHost(ctx, src+"/a.txt", "single.txt", driver.CopyOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Files)
}

func TestTreeString(t *testing.T) {
	n := &driver.TreeNode{Name: "root", IsDir: true, Omitted: 2, Children: []*driver.TreeNode{{Name: "a", IsDir: true}, {Name: "b.txt"}}}
	assert.Equal(t, "root/\n  a/\n  b.txt\n  ... 2 more\n", n.String())
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/../../b", "/workspace/x", "/mnt/data/../../etc", "//x", "a\x00b", "/workspace/../workspace/x"} {
		f.Add(s)
	}
	ws, data := f.TempDir(), f.TempDir()
	pm, err := NewPathMapper("/workspace", ws, []driver.VolumeMount{{HostPath: data, SandboxPath: "/mnt/data", ReadOnly: true}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		loc, err := pm.Resolve(p)
		if err != nil {
			if !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("%q: error %v is not a permission error", p, err)
			}
			return
		}
		if loc.Host != loc.Root && !strings.HasPrefix(loc.Host, loc.Root+string(filepath.Separator)) {
			t.Fatalf("%q resolved to %q outside its root %q", p, loc.Host, loc.Root)
		}
		if strings.Contains("/"+loc.Rel+"/", "/../") {
			t.Fatalf("%q kept .. in %q", p, loc.Rel)
		}
		back, err := pm.ToVirtual(loc.Host)
		if err != nil || back != loc.Virtual {
			t.Fatalf("%q: round trip %q -> %q -> %q (%v)", p, loc.Virtual, loc.Host, back, err)
		}
	})
}

// A FIFO made in the workspace must not hang the host-side reader or
// writer.
func TestHostFSRefusesFIFOsWithoutBlocking(t *testing.T) {
	h, m := hostFS(t)
	ctx := context.Background()
	require.NoError(t, syscall.Mkfifo(m.ws+"/trap.py", 0o644))
	done := make(chan error, 2)
	go func() { _, err := h.ReadFile(ctx, "trap.py"); done <- err }()
	go func() { done <- h.WriteFile(ctx, "trap.py", []byte("x"), driver.WriteOptions{Append: true}) }()
	for range 2 {
		select {
		case err := <-done:
			assert.Error(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("a FIFO blocked the file API")
		}
	}
	_, err := h.ReadFile(ctx, "nested")
	assert.ErrorIs(t, err, syscall.EISDIR)
}

// TestWorkdirErrorNamesTheSandboxPath: a missing working directory is
// reported by its sandbox path, never by the host directory behind it
// (the error reaches the model and the traces). Control: the host path
// is a real prefix the old message carried.
func TestWorkdirErrorNamesTheSandboxPath(t *testing.T) {
	ws := t.TempDir()
	pm, err := NewPathMapper("/workspace", ws, nil)
	require.NoError(t, err)
	h := &HostFS{Mapper: pm}
	_, err = h.Workdir(driver.ExecOptions{Workdir: "no/such/dir"})
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotContains(t, err.Error(), ws, "the host workspace leaks")
	assert.Contains(t, err.Error(), "/workspace/no/such/dir")
}
