package hostkit

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// TestDirOpenProbe: on Linux the kernel refuses a symlink for
// openat(O_NOFOLLOW|O_DIRECTORY), so HostFS leaves the walk to os.Root;
// under gVisor (runsc) the probe must say it follows.
func TestDirOpenProbe(t *testing.T) {
	v, _ := os.ReadFile("/proc/version")
	// gVisor's /proc/version names it, or (older releases) is this fixed
	// string.
	gvisor := strings.Contains(strings.ToLower(string(v)), "gvisor") ||
		strings.Contains(string(v), "4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016")
	if got := dirOpenFollowsSymlinks(); got != (runtime.GOOS == "linux" && gvisor) {
		t.Fatalf("dirOpenFollowsSymlinks() = %v on %s (gVisor %v)", got, runtime.GOOS, gvisor)
	}
}

// TestResolveDirsConfines runs HostFS with the user-space directory walk
// forced on (as under gVisor) against the directory-symlink escapes of
// the contract suite, and checks symlinks inside keep working.
//
// "AsProbed" leaves the choice to the probe: on Linux os.Root alone
// confines; run under runsc (go test -c, then runsc do ./sandbox.test
// -test.run ResolveDirs) it is resolveDirs, and without it the escapes
// succeed there.
func TestResolveDirsConfines(t *testing.T) {
	t.Run("AsProbed", testResolveDirsConfines)
	t.Run("Forced", func(t *testing.T) {
		old := needResolveDirs
		needResolveDirs = func() bool { return true }
		t.Cleanup(func() { needResolveDirs = old })
		testResolveDirsConfines(t)
	})
}

func testResolveDirsConfines(t *testing.T) {
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
	if err := h.WriteFile(ctx, "root_link"+outside+"/written", []byte("x"), driver.WriteOptions{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("write through root_link: %v, want fs.ErrPermission", err)
	}
	if err := h.WriteFile(ctx, "abs_out/sub/written", []byte("x"), driver.WriteOptions{}); !errors.Is(err, fs.ErrPermission) {
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
	must(h.WriteFile(ctx, "in_link/new/file.txt", []byte("new"), driver.WriteOptions{}))
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

// TestResolveDirsUnderRunsc runs this file's tests again inside gVisor
// (runsc do), where os.Root alone does not confine: without resolveDirs
// the escapes of TestResolveDirsConfines succeed there.
func TestResolveDirsUnderRunsc(t *testing.T) {
	if os.Getenv("SAGE_TEST_IN_RUNSC") == "1" {
		t.Skip("already inside runsc")
	}
	if runtime.GOOS != "linux" {
		t.Skip("gVisor is Linux-only")
	}
	runsc := testenv.Command(t, "runsc", testenv.SetupFix+" (it installs runsc)")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root for runsc do", "run the tests as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runsc, "--network=none", "do", "--", os.Args[0], "-test.run", "^(TestDirOpenProbe|TestResolveDirsConfines|TestResolveDirsResult)$", "-test.v")
	cmd.Env = append(os.Environ(), "SAGE_TEST_IN_RUNSC=1")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestResolveDirsConfines") {
		t.Fatalf("under runsc: %v\n%s", err, out)
	}
}
