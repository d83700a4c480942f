//go:build linux

package local_test

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// unprivilegedUser is created for the test when missing.
const unprivilegedUser = "sage-test"

// TestUnprivileged re-runs the isolation, limit and egress tests as an ordinary
// user, which is how most people run sage: there, the pids limit rests on
// RLIMIT_NPROC in the user namespace and the default memory limit on
// RLIMIT_AS, not on cgroups, and an explicit CPU time or memory limit is
// refused (the TestLimit* tests check each case).
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests cover it")
	}
	requireBwrap(t)
	u := ensureUser(t)
	dir, err := os.MkdirTemp("", "sage-unpriv-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "local.test")
	copyFile(t, os.Args[0], bin)
	home := filepath.Join(dir, "home")
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, os.Chown(home, u.uid, u.gid))

	cmd := exec.Command(bin, "-test.run", "^(TestContract|TestEscapeSuite|TestLimit.*|TestNetworkOffAndOpen|TestEgress.*|TestTimeoutKillsTheWholeTree|TestHostStaysResponsiveDuringForkBomb|TestRedTeam.*|TestDiskQuota.*)$", "-test.count=1")
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "SAGE_HOME=" + home + "/.sage",
		"TMPDIR=" + home, "SAGE_TEST_UNPRIVILEGED=1", testenv.AllowSkipEnv + "=" + os.Getenv(testenv.AllowSkipEnv)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	out, err := cmd.CombinedOutput()
	t.Logf("as %s (uid %d):\n%s", unprivilegedUser, u.uid, tail(string(out), 4000))
	require.NoError(t, err, "the isolation tests failed as an unprivileged user")
}

type uidGid struct{ uid, gid int }

func ensureUser(t *testing.T) uidGid {
	t.Helper()
	u, err := user.Lookup(unprivilegedUser)
	if err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", unprivilegedUser).CombinedOutput()
		require.NoError(t, err, "useradd: %s", out)
		u, err = user.Lookup(unprivilegedUser)
		require.NoError(t, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uidGid{uid, gid}
}

func copyFile(t *testing.T, src, dst string) {
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
