package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestDirOpenProbe: on Linux the kernel refuses a symlink for
// openat(O_NOFOLLOW|O_DIRECTORY), so HostFS leaves the walk to os.Root;
// under gVisor (runsc) the probe must say it follows.
func TestDirOpenProbe(t *testing.T) {
	v, _ := os.ReadFile("/proc/version")
	gvisor := strings.Contains(strings.ToLower(string(v)), "gvisor")
	if got := dirOpenFollowsSymlinks(); got != (runtime.GOOS == "linux" && gvisor) {
		t.Fatalf("dirOpenFollowsSymlinks() = %v on %s (gVisor %v)", got, runtime.GOOS, gvisor)
	}
}

// TestResolveDirsConfines runs HostFS with the user-space directory walk
// forced on (as under gVisor) against the directory-symlink escapes of
// the contract suite, and checks symlinks inside keep working.
func TestResolveDirsConfines(t *testing.T) {
	old := needResolveDirs
	needResolveDirs = func() bool { return true }
	t.Cleanup(func() { needResolveDirs = old })
	ws, outside := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	must(os.MkdirAll(filepath.Join(ws, "in", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "in", "ok.txt"), []byte("ok"), 0o644))
	for link, target := range map[string]string{"root_link": "/", "abs_out": outside, "up": "..",
		"in_link": "in", "in/back": "../in/deep/..", "in/deep/up2": "../../..", "loop": "loop"} {
		must(os.Symlink(target, filepath.Join(ws, link)))
	}
	pm, err := NewPathMapper("/workspace", ws, nil)
	must(err)
	h := &HostFS{Mapper: pm}
	ctx := context.Background()
	for _, p := range []string{"root_link" + outside + "/secret", "abs_out/secret", "up/" + filepath.Base(outside) + "/secret",
		"in/deep/up2/" + filepath.Base(outside) + "/secret", "in_link/deep/up2/x"} {
		if _, err := h.ReadFile(ctx, p); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("read %s: %v, want fs.ErrPermission", p, err)
		}
	}
	if err := h.WriteFile(ctx, "root_link"+outside+"/written", []byte("x"), WriteOptions{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("write through root_link: %v, want fs.ErrPermission", err)
	}
	if err := h.WriteFile(ctx, "abs_out/sub/written", []byte("x"), WriteOptions{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("write through abs_out: %v, want fs.ErrPermission", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("outside now holds %d entries, want only secret", len(entries))
	}
	if _, err := h.ReadFile(ctx, "loop/x"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("read through a symlink loop: %v, want ELOOP", err)
	}
	for _, p := range []string{"in_link/ok.txt", "in/back/ok.txt", "in_link/back/ok.txt"} {
		if b, err := h.ReadFile(ctx, p); err != nil || string(b) != "ok" {
			t.Errorf("read %s: %q, %v", p, b, err)
		}
	}
	must(h.WriteFile(ctx, "in_link/new/file.txt", []byte("new"), WriteOptions{}))
	if b, err := os.ReadFile(filepath.Join(ws, "in", "new", "file.txt")); err != nil || string(b) != "new" {
		t.Errorf("write through in_link landed elsewhere: %q, %v", b, err)
	}
}

// TestResolveDirsResult checks resolveDirs' own answers (on Linux os.Root
// would catch the escapes anyway, so this is what proves the walk).
func TestResolveDirsResult(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "in", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"root_link": "/", "up": "..", "in_link": "in", "in/back": "../in/deep/..", "file_link": "in/f"} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for rel, want := range map[string]string{"in_link/ok.txt": "in/ok.txt", "in_link/back/deep/x": "in/deep/x",
		"file_link": "file_link", "in_link": "in_link", "missing/x/y": "missing/x/y", ".": "."} {
		if got, err := resolveDirs(root, rel); err != nil || got != want {
			t.Errorf("resolveDirs(%q) = %q, %v; want %q", rel, got, err, want)
		}
	}
	for _, rel := range []string{"root_link/etc/passwd", "up/x", "in_link/back/../../up/x"} {
		if got, err := resolveDirs(root, rel); !errors.Is(err, errDirEscapes) {
			t.Errorf("resolveDirs(%q) = %q, %v; want errDirEscapes", rel, got, err)
		}
	}
}
