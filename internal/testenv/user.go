package testenv

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// UnprivilegedUser is the ordinary user that tests re-run themselves as
// (created, system and without a home, when missing; the caller must be
// root).
const UnprivilegedUser = "sage-test"

// EnsureUser returns the uid and gid of UnprivilegedUser, creating it with
// useradd when missing (two test binaries racing to create it is fine).
func EnsureUser(t testing.TB) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup(UnprivilegedUser)
	if err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", UnprivilegedUser).CombinedOutput()
		if err != nil && !bytes.Contains(out, []byte("already exists")) {
			t.Fatalf("useradd %s: %v: %s (fix: apt-get install passwd)", UnprivilegedUser, err, out)
		}
		if u, err = user.Lookup(UnprivilegedUser); err != nil {
			t.Fatal(err)
		}
	}
	if uid, err = strconv.Atoi(u.Uid); err == nil {
		gid, err = strconv.Atoi(u.Gid)
	}
	if err != nil {
		t.Fatalf("user %s: %v", UnprivilegedUser, err)
	}
	return uid, gid
}

// CopyExecutable copies a test binary to dst (0755, which must not exist),
// so that another user can run it from a directory it may reach.
func CopyExecutable(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// RunUnprivileged re-runs this test binary as UnprivilegedUser with args
// (-test.run and the like), from a copy in a directory that user may
// reach, with a home of its own as working directory, HOME, TMPDIR and
// SAGE_HOME (its .sage),
// the allow-skip choice passed through, and env added. It logs the tail
// of the output and returns it with the run's error.
func RunUnprivileged(t testing.TB, args []string, env ...string) (string, error) {
	t.Helper()
	uid, gid := EnsureUser(t)
	dir, err := os.MkdirTemp("", "sage-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(exe))
	CopyExecutable(t, exe, bin)
	cmd := exec.Command(bin, args...)
	cmd.Dir = home
	cmd.Env = append([]string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home,
		"SAGE_HOME=" + filepath.Join(home, ".sage"), AllowSkipEnv + "=" + os.Getenv(AllowSkipEnv)}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	tail := string(out)
	if len(tail) > 4000 {
		tail = "..." + tail[len(tail)-4000:]
	}
	t.Logf("as %s (uid %d):\n%s", UnprivilegedUser, uid, tail)
	return string(out), err
}
