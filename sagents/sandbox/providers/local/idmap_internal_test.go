//go:build linux

package local

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// requireIdmap needs root (only root's sandboxes switch uids) and a
// file system of the test's temporary directory that takes idmapped
// mounts (ext4, xfs, btrfs, tmpfs on Linux 5.12+).
func requireIdmap(t *testing.T) {
	t.Helper()
	if os.Getenv("SAGE_TEST_UNPRIVILEGED") == "1" {
		t.Skip("idmapped workspaces are root's: an unprivileged user's commands run as that user")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (idmapped workspaces are made as root)", "run the tests as root")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is missing; fix: apt-get install bubblewrap")
	}
	if err := uids.IdmapAvailable(os.TempDir()); err != nil {
		testenv.Missing(t, "idmapped mounts on "+os.TempDir(), err.Error())
	}
}

// rootsProject is a user's existing project as root has it: a folder of
// root's (0755) holding root's files and one of another user's.
func rootsProject(t *testing.T) string {
	t.Helper()
	ws := sandboxtest.TempDir(t)
	require.NoError(t, os.Chmod(ws, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "src", "main.py"), []byte("print('hi')\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "other.txt"), []byte("another user's\n"), 0o644))
	require.NoError(t, os.Lchown(filepath.Join(ws, "other.txt"), 4321, 4321))
	return ws
}

// ownerOnDisk is the uid and gid of p on disk (not through a mount).
func ownerOnDisk(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// hostUIDOf finds the host process whose command line holds mark and
// returns its real uid as the host sees it.
func hostUIDOf(t *testing.T, mark string) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil || !strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), mark) {
				continue
			}
			status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
					uid, _ := strconv.Atoi(f[1])
					return uid
				}
			}
		}
	}
	t.Fatalf("no process %q", mark)
	return -1
}

// noMountUnder says nothing is mounted at or below dir.
func noMountUnder(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(b), " "+dir, "a mount is left under %s", dir)
}

// Issue 37, item 7: as root, a user's existing, non-empty, root-owned
// project works as a workspace, its files still root's afterwards, and
// the sandbox is still not host root. The control is today's refusal,
// where idmapped mounts are unavailable.
func TestIdmappedWorkspace(t *testing.T) {
	requireIdmap(t)
	for _, session := range []bool{false, true} {
		t.Run(map[bool]string{false: "per command", true: "session"}[session], func(t *testing.T) {
			testIdmapped(t, func(c *sandbox.Config) {
				c.Local.FreshPerCommand = &[]bool{!session}[0]
			})
		})
	}
}

func testIdmapped(t *testing.T, mutate func(*sandbox.Config)) {
	ws := rootsProject(t)
	secret := sandboxtest.TempDir(t) // root's, outside the workspace
	require.NoError(t, os.Chmod(secret, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(secret, "key"), []byte("s3cret"), 0o600))
	rt := sandboxtest.TempDir(t)
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: rt, SandboxID: "idm",
		Mounts: []sandbox.VolumeMount{{HostPath: secret, SandboxPath: "/mnt/secret", ReadOnly: true}}}
	mutate(&cfg)
	ctx := context.Background()
	h, err := sandbox.New(ctx, cfg)
	require.NoError(t, err, "a root-owned project is a workspace: %v", err)
	closed := false
	defer func() {
		if !closed {
			h.Close(ctx)
		}
	}()
	s := h.Driver().(*Sandbox)
	require.True(t, s.ident.Idmapped())
	sandboxUID := s.ident.UID
	run := func(cmd string) *sandbox.CommandResult {
		t.Helper()
		res, err := h.ExecuteCommand(ctx, cmd, sandbox.ExecOptions{Timeout: time.Minute})
		require.NoError(t, err, cmd)
		return res
	}

	// Inside, the folder and root's files are the sandbox's own; another
	// user's file shows as nobody.
	res := run("stat -c '%u %n' . src/main.py other.txt")
	assert.Equal(t, "0 .\n0 src/main.py\n65534 other.txt\n", res.Stdout, res.Stderr)
	// What it writes lands on disk as root's, existing files stay root's.
	res = run("echo new > new.txt && mkdir -p d/e && echo f > d/e/f && echo more >> src/main.py && cat other.txt")
	require.True(t, res.Success, res.Stderr)
	assert.Equal(t, "another user's\n", res.Stdout, "another user's readable file is readable")
	for _, p := range []string{".", "new.txt", "d", "d/e/f", "src/main.py"} {
		assert.Equal(t, "0:0", ownerOnDisk(t, filepath.Join(ws, p)), "%s is root's on disk", p)
	}
	assert.Equal(t, "4321:4321", ownerOnDisk(t, filepath.Join(ws, "other.txt")))
	b, _ := os.ReadFile(filepath.Join(ws, "src", "main.py"))
	assert.Equal(t, "print('hi')\nmore\n", string(b))
	fi, _ := os.Stat(ws)
	assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "the folder keeps its mode")
	// sage's own file operations keep the folder's owner too.
	require.NoError(t, h.WriteFile(ctx, "byhost/x.txt", []byte("x"), sandbox.WriteOptions{}))
	assert.Equal(t, "0:0", ownerOnDisk(t, filepath.Join(ws, "byhost", "x.txt")))

	// Still not host root: it runs as the sandbox's uid on the host, reads
	// no root file outside the workspace, chowns nothing, and makes no
	// set-user-ID file (which would be root's on disk).
	sleepCtx, stopSleep := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ExecuteCommand(sleepCtx, "sleep 7717", sandbox.ExecOptions{Timeout: 30 * time.Second})
	}()
	assert.Equal(t, sandboxUID, hostUIDOf(t, "sleep 7717"), "its processes are the sandbox's uid on the host, not root")
	stopSleep()
	<-done
	res = run("cat /mnt/secret/key; echo rc=$?; cat /etc/shadow >/dev/null 2>&1; echo shadow=$?; " +
		"chown 4321 new.txt; echo chown=$?; cp /bin/true su && chmod 4755 su; echo suid=$?; touch /etc/x 2>/dev/null; echo etc=$?")
	assert.NotContains(t, res.Stdout, "s3cret")
	assert.Contains(t, res.Stdout, "rc=1\nshadow=1\nchown=1\nsuid=1\netc=1\n", res.Stderr)
	if fi, err := os.Stat(filepath.Join(ws, "su")); err == nil {
		assert.Zero(t, fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid), "no set-user-ID file of root's is left")
	}
	assert.Equal(t, "0:0", ownerOnDisk(t, filepath.Join(ws, "new.txt")), "chown changed nothing")

	require.NoError(t, h.Close(ctx))
	closed = true
	noMountUnder(t, rt)
	assert.NoDirExists(t, filepath.Join(rt, uids.StagingName))
	assert.Equal(t, "0:0", ownerOnDisk(t, ws), "the folder is root's afterwards")
}

// Where idmapped mounts are unavailable, the refusal stands, saying why
// and with its fix, and nothing of the folder changes.
func TestIdmapUnavailableKeepsTheRefusal(t *testing.T) {
	requireIdmap(t)
	uids.UseIdmap = false
	defer func() { uids.UseIdmap = true }()
	ws := rootsProject(t)
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(t)})
	require.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), "an idmapped mount that would keep its files uid 0's is not available (idmapped workspaces are switched off)")
	assert.Contains(t, err.Error(), "fix: chown -R ")
	assert.Equal(t, "0:0", ownerOnDisk(t, ws))
	fi, _ := os.Stat(ws)
	assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
}

// The seccomp filter is what keeps a command from leaving a set-user-ID
// file that is root's on disk (the idmapped mount makes its files
// root's): with it off (the control), the attack works.
func TestRedTeamIdmappedSetuid(t *testing.T) {
	requireIdmap(t)
	attack := func(t *testing.T) (ok bool) {
		ws := rootsProject(t)
		fresh := true
		h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(t),
			Local: sandbox.LocalConfig{FreshPerCommand: &fresh}})
		require.NoError(t, err)
		defer h.Close(context.Background())
		_, err = h.ExecuteCommand(context.Background(), "cp /bin/true su; chmod 4755 su", sandbox.ExecOptions{})
		require.NoError(t, err)
		fi, err := os.Stat(filepath.Join(ws, "su"))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		return fi.Mode()&fs.ModeSetuid != 0 && st.Uid == 0
	}
	assert.False(t, attack(t), "a set-user-ID root file was made in the workspace")
	control(t, &isolation.UseSeccomp, func(t *testing.T) {
		assert.True(t, attack(t), "control: without the filter the attack works, so the test detects it")
	})
}

// A sandbox killed with its idmapped mount attached (SIGKILL: no Close)
// leaves it; the next sandbox of the same runtime directory removes it,
// and one of another finds it by mountinfo.
func TestStaleIdmappedMountIsRemoved(t *testing.T) {
	requireIdmap(t)
	home := sandboxtest.TempDir(t)
	t.Setenv("SAGE_HOME", home)
	ws, rt := rootsProject(t), filepath.Join(home, "runtime", "dead")
	require.NoError(t, os.MkdirAll(rt, 0o711))
	id := &uids.Identity{UID: 2000012399, GID: 2000012399, Idmap: &uids.IdmapOwner{}}
	m, err := uids.MountIdmapped(ws, rt, id)
	require.NoError(t, err)
	defer m.Release()
	dead := exec.Command("sleep", "60")
	require.NoError(t, dead.Start())
	require.NoError(t, os.WriteFile(m.Staging+".owner", []byte(uids.ProcToken(dead.Process.Pid)), 0o600), "its owner...")
	dead.Process.Kill()
	dead.Wait() // ...is gone
	b, _ := os.ReadFile("/proc/self/mountinfo")
	require.Contains(t, string(b), m.Staging, "mounted")

	live, err := uids.MountIdmapped(rootsProject(t), filepath.Join(home, "runtime"), id) // control: a live one stays
	require.NoError(t, err)
	defer live.Release()
	uids.SweepIdmapped(home)
	noMountUnder(t, rt)
	b, _ = os.ReadFile("/proc/self/mountinfo")
	assert.Contains(t, string(b), live.Staging, "control: a live sandbox's mount is kept")
}

// gVisor (where it runs): runsc's gofer creates as root and chowns; the
// idmapped mount's stand-in for root lets it, and files land root's.
func TestIdmappedWorkspaceUnderGvisor(t *testing.T) {
	requireIdmap(t)
	if _, err := exec.LookPath("runsc"); err != nil {
		testenv.Missing(t, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh)")
	}
	for _, fresh := range []bool{true, false} {
		t.Run(map[bool]string{true: "per command", false: "session"}[fresh], func(t *testing.T) {
			ws := rootsProject(t)
			h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(t),
				Local: sandbox.LocalConfig{Isolation: sandbox.Isolation{Linux: sandbox.IsolationGvisor}, FreshPerCommand: &fresh}})
			require.NoError(t, err)
			defer h.Close(context.Background())
			res, err := h.ExecuteCommand(context.Background(), "cat src/main.py && echo g > g.txt && mkdir gd && echo z > gd/z && echo ok", sandbox.ExecOptions{Timeout: time.Minute})
			require.NoError(t, err)
			assert.Equal(t, "print('hi')\nok\n", res.Stdout, res.Stderr)
			for _, p := range []string{"g.txt", "gd", "gd/z", "src/main.py"} {
				assert.Equal(t, "0:0", ownerOnDisk(t, filepath.Join(ws, p)), p)
			}
		})
	}
}
