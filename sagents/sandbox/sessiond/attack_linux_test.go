//go:build linux

package sessiond

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local"
)

// The session daemon against an attacker (#31): a peer of the daemon's
// own uid is no proof that it is outside every sandbox (attack 5), and a
// daemon whose directory is gone must not keep its sandbox (attack 6).
// TestSessiondUnprivileged reruns these as an ordinary user.

// runSandboxedClient runs TestForeignClientHelper inside bwrap, as this
// uid, in its own user and mount namespaces, with the whole file system
// (the daemon's socket and key included) shown read-only: what a command
// of a sandbox with a mount over SAGE_HOME is.
func runSandboxedClient(t *testing.T, dir, marker string) string {
	t.Helper()
	bwrap := testenv.Command(t, "bwrap", "apt-get install bubblewrap")
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--bind", filepath.Dir(marker), filepath.Dir(marker), "--", exe, "-test.run", "^TestForeignClientHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), foreignSocketEnv+"="+dir, "SAGE_TEST_MARKER="+marker)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestSandboxedPeerRefused: a client in a sandbox that sees the daemon's
// directory (socket and key) connects as the daemon's uid; the daemon
// refuses it, its peer being in another user and mount namespace.
// Control: with that check off, the same client gets its command run.
func TestSandboxedPeerRefused(t *testing.T) {
	s := serve(t, 0)
	marker := filepath.Join(s.home, "ws", "sandboxed-was-here")
	out := runSandboxedClient(t, s.dir, marker)
	assert.Contains(t, out, "FOREIGN-RESULT: refused: the peer", out)
	assert.Contains(t, out, "namespace")
	assert.NoFileExists(t, marker, "the sandboxed client's command ran")

	trustNamespaces.Store(true)
	defer trustNamespaces.Store(false)
	out = runSandboxedClient(t, s.dir, marker)
	assert.Contains(t, out, "FOREIGN-RESULT: <nil>", out)
	assert.FileExists(t, marker, "control: the attack works when the check is off")
}

// TestKeylessRequestRefused: a client of the daemon's uid, in its
// namespaces, that does not send the daemon's key (it cannot read the
// daemon's directory) is refused. Control: the same request with the key
// runs.
func TestKeylessRequestRefused(t *testing.T) {
	s := serve(t, 0)
	marker := filepath.Join(s.home, "ws", "keyless")
	send := func(key string) Response {
		c, err := dial(s.dir)
		require.NoError(t, err)
		defer c.Close()
		r, err := exchange(context.Background(), c, Request{Op: OpExec, Command: "touch " + marker, Key: key}, Streams{})
		if err != nil {
			require.ErrorIs(t, err, ErrRefused)
		}
		return r
	}
	for _, key := range []string{"", "0000"} {
		r := send(key)
		assert.Equal(t, "refused", r.Kind, r.Error)
		assert.NoFileExists(t, marker)
	}
	r := send(readKey(s.dir))
	assert.Empty(t, r.Error, "control: with the key the request runs")
	assert.FileExists(t, marker)
}

// serveLocal runs a Server over a local sandbox (a session sandbox of
// isolation iso: "" for bwrap) in home, with a short path (a unix
// socket's is at most 107 bytes).
func serveLocal(t *testing.T, iso string) (*served, string) {
	t.Helper()
	testenv.Command(t, "bwrap", "apt-get install bubblewrap")
	base, err := os.MkdirTemp("/tmp", "s31d-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(base, 0o711))
	t.Cleanup(func() { os.RemoveAll(base) })
	home := filepath.Join(base, "h")
	name := "s" + strconv.Itoa(os.Getpid()%100000)
	dir, err := Dir(home, name)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, "sessions", name), 0o711))
	for _, d := range []string{home, filepath.Join(home, "sessions")} {
		require.NoError(t, os.Chmod(d, 0o711))
	}
	cfg := sandbox.Config{Mode: sandbox.Local, SandboxID: name, Workspace: filepath.Join(home, "sessions", name, "workspace"),
		RuntimeDir: filepath.Join(home, "sessions", name, "runtime")}
	cfg.Local.Isolation.Linux = iso
	h, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	s := start(t, &Server{Name: name, Dir: dir, Sandbox: h, Settings: "want", Logf: t.Logf}, home)
	return s, name
}

// TestDaemonStopsWithItsDir: a daemon whose directory is removed (rm -rf
// of SAGE_HOME) or replaced (another SAGE_HOME at its path) stops within
// seconds, and its sandbox leaves no process, cgroup or mount behind; a
// replaced directory's new files are left alone. Control: with the watch
// off the daemon serves on.
func TestDaemonStopsWithItsDir(t *testing.T) {
	for _, iso := range []string{"", sandbox.IsolationGvisor} {
		for _, how := range []string{"removed", "replaced"} {
			t.Run(fmt.Sprintf("%s %s", map[string]string{"": "bwrap"}[iso]+iso, how), func(t *testing.T) {
				if iso != "" {
					if os.Getenv("SAGE_TEST_UNPRIVILEGED") == "1" {
						t.Skip("isolation gvisor runs runsc as root; the unprivileged rerun checks bwrap")
					}
					if os.Geteuid() != 0 {
						testenv.Missing(t, "root (isolation gvisor runs runsc as root)", "run the tests as root")
					}
					testenv.Command(t, "runsc", testenv.SetupFix)
				}
				s, name := serveLocal(t, iso)
				sleep := "sleep " + strconv.Itoa(800+os.Getpid()%100)
				_, err := Call(context.Background(), s.dir, Request{Op: OpExec, Command: sleep + " >/dev/null 2>&1 & echo ok"}, Streams{})
				require.NoError(t, err)
				cgroups := testenv.CgroupsMatching("sage-" + name + "-*")
				mark := sleep // bwrap's processes are the host's; gVisor's are inside runsc, whose command line names its state directory
				if iso != "" {
					mark = filepath.Join(s.home, "sessions", name)
				}
				require.NotEmpty(t, testenv.Processes(mark), "the session runs")
				sessions := filepath.Join(s.home, "sessions")
				switch how {
				case "removed":
					if err := os.RemoveAll(sessions); err != nil {
						t.Logf("rm -rf: %v", err) // runsc's nsfs mount point stays
					}
				case "replaced":
					require.NoError(t, os.Rename(sessions, sessions+".old"))
					require.NoError(t, os.MkdirAll(s.dir, 0o700))
					require.NoError(t, os.WriteFile(filepath.Join(s.dir, sockName), []byte("another's"), 0o600))
				}
				select {
				case err := <-s.done:
					require.NoError(t, err)
					s.done <- nil
				case <-time.After(15 * time.Second):
					t.Fatal("the daemon outlived its directory by 15 s")
				}
				assert.Empty(t, testenv.Processes(mark), "a process of the session is left")
				for _, cg := range cgroups {
					_, err := os.Stat(cg)
					assert.True(t, os.IsNotExist(err), "cgroup %s left behind", cg)
				}
				assert.Empty(t, testenv.MountsUnder(s.home), "a mount under the session's folder is left")
				if how == "replaced" {
					assert.FileExists(t, filepath.Join(s.dir, sockName), "the new directory's files are another's")
				}
			})
		}
	}
	t.Run("control", func(t *testing.T) {
		ignoreDir.Store(true)
		defer ignoreDir.Store(false)
		s, _ := serveLocal(t, "")
		require.NoError(t, os.RemoveAll(filepath.Join(s.home, "sessions")))
		select {
		case <-s.done:
			s.done <- nil
			t.Fatal("control: the daemon stopped without the watch")
		case <-time.After(3 * dirCheckInterval):
		}
	})
}

// TestSessiondUnprivileged reruns the attacks above as an ordinary user.
func TestSessiondUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the tests above run as this user")
	}
	_, err := testenv.RunUnprivileged(t, []string{"-test.run", "^(TestSandboxedPeerRefused|TestKeylessRequestRefused|TestDaemonStopsWithItsDir)$", "-test.count=1", "-test.v"},
		"SAGE_TEST_UNPRIVILEGED=1")
	require.NoError(t, err, "the attacks on the session daemon worked as an unprivileged user")
}
