//go:build linux

package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

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
	uid, gid := testenv.EnsureUser(t)
	dir, err := os.MkdirTemp("", "sage-unpriv-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "local.test")
	testenv.CopyExecutable(t, os.Args[0], bin)
	home := filepath.Join(dir, "home")
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, os.Chown(home, uid, gid))

	cmd := exec.Command(bin, "-test.run", "^(TestContract|TestEscapeSuite|TestLimit.*|TestNetworkOffAndOpen|TestEgress.*|TestTimeoutKillsTheWholeTree|TestHostStaysResponsiveDuringForkBomb|TestRedTeam.*|TestDiskQuota.*)$", "-test.count=1")
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "SAGE_HOME=" + home + "/.sage",
		"TMPDIR=" + home, "SAGE_TEST_UNPRIVILEGED=1", testenv.AllowSkipEnv + "=" + os.Getenv(testenv.AllowSkipEnv)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	t.Logf("as %s (uid %d):\n%s", testenv.UnprivilegedUser, uid, tail(string(out), 4000))
	require.NoError(t, err, "the isolation tests failed as an unprivileged user")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
