package testenv

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strconv"
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
