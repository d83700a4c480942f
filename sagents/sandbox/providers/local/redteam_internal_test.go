//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// The red-team tests: each attack was reproduced on the code before this
// change; each test runs the attack against the sandbox (it must fail)
// and, as a control, with that one protection switched off (it must
// succeed, which proves the test detects the attack). They run as root
// in CI and again as an unprivileged user (TestUnprivileged).

func rtSandbox(t *testing.T, mutate func(*sandbox.Config)) *Sandbox {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is missing; fix: apt-get install bubblewrap")
	}
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	if !rtSession { // a fresh sandbox per command, as before the session default
		fresh := true
		cfg.Local.FreshPerCommand = &fresh
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := NewWithOptions(context.Background(), cfg, Options{Session: SessionOptions{Enabled: rtSession}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// rtSession runs the red-team tests' commands in a session sandbox
// (TestSessionRedTeam).
var rtSession bool

func rtRun(t *testing.T, s *Sandbox, cmd string, opts sandbox.ExecOptions) *sandbox.CommandResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.Exec(ctx, driver.ExecSpec{Command: cmd, ExecOptions: opts})
	require.NoError(t, err)
	return res
}

// waitBackground waits until a background task printed want.
func waitBackground(s *Sandbox, id, want string, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out, _ := s.ReadBackgroundOutput(context.Background(), id, 0, 1<<16); strings.Contains(out.Text, want) {
			return
		}
	}
}

// control runs f with one protection switched off.
func control(t *testing.T, knob *bool, f func(t *testing.T)) {
	t.Run("control", func(t *testing.T) {
		*knob = false
		defer func() { *knob = true }()
		f(t)
	})
}

// A descriptor the caller left open without close-on-exec (sage exec ...
// 8</) must not reach the command: it is a handle on a host directory.
func TestRedTeamInheritedDescriptor(t *testing.T) {
	attack := func(t *testing.T) string {
		s := rtSandbox(t, nil)
		low, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		// Above the descriptors os/exec gives bwrap (3-7), and without
		// O_CLOEXEC, as a shell's 8</ leaves it.
		fd, err := unix.FcntlInt(uintptr(low), unix.F_DUPFD, 100)
		unix.Close(low)
		require.NoError(t, err)
		defer unix.Close(fd)
		res := rtRun(t, s, fmt.Sprintf("test -e /proc/self/fd/%d/etc/hostname && echo LEAK || echo sealed", fd), sandbox.ExecOptions{})
		return res.Stdout
	}
	assert.Equal(t, "sealed\n", attack(t))
	control(t, &isolation.ProtectFDs, func(t *testing.T) { assert.Equal(t, "LEAK\n", attack(t)) })
}

// stdin redirected from a host file must not let the command write that
// file through /proc/self/fd/0.
func TestRedTeamStdinIsAPipe(t *testing.T) {
	attack := func(t *testing.T) string {
		s := rtSandbox(t, nil)
		dir := sandboxtest.TempDir(t)
		host := filepath.Join(dir, "hostfile")
		require.NoError(t, os.WriteFile(host, []byte("original\n"), 0o666))
		require.NoError(t, os.Chmod(host, 0o666)) // writable by anyone: only the descriptor protects it
		in, err := os.Open(host)
		require.NoError(t, err)
		defer in.Close()
		rtRun(t, s, "echo X > /proc/self/fd/0; true", sandbox.ExecOptions{Stdin: in})
		data, err := os.ReadFile(host)
		require.NoError(t, err)
		return string(data)
	}
	assert.Equal(t, "original\n", attack(t))
	control(t, &stdinViaPipe, func(t *testing.T) { assert.Equal(t, "X\n", attack(t)) })
}

func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as an ordinary user uid 0 inside is that user: nothing to switch (the other tests cover it)")
	}
}

// A file made inside must not belong to host root: a setuid copy of a
// shell left in the workspace would be a root shell for any local user.
func TestRedTeamSetuidCopyIsNotRoot(t *testing.T) {
	requireRoot(t)
	attack := func(t *testing.T) uint32 {
		s := rtSandbox(t, nil)
		res := rtRun(t, s, "cp /bin/sh ./rootsh; chmod 4755 ./rootsh; id -u", sandbox.ExecOptions{})
		require.Equal(t, "0\n", res.Stdout, "inside, the sandbox still looks like root: %s", res.Stderr)
		fi, err := os.Stat(filepath.Join(s.HostWorkspacePath(), "rootsh"))
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	uid := attack(t)
	first, count, err := uids.Range("")
	require.NoError(t, err)
	assert.True(t, uid >= first && uid < first+count, "owner %d is not a session uid", uid)
	control(t, &switchUID, func(t *testing.T) { assert.Equal(t, uint32(0), attack(t)) })
}

// A root-only file outside the masked /etc list (here on a read-only
// mount) must not be readable inside.
func TestRedTeamRootOnlyFilesStayClosed(t *testing.T) {
	requireRoot(t)
	attack := func(t *testing.T) string {
		dir := sandboxtest.TempDir(t)
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "secret"), []byte("s3cret"), 0o600))
		s := rtSandbox(t, func(c *sandbox.Config) {
			c.Mounts = []sandbox.VolumeMount{{HostPath: dir, SandboxPath: "/data", ReadOnly: true}}
		})
		return rtRun(t, s, "cat /data/secret 2>/dev/null; true", sandbox.ExecOptions{}).Stdout
	}
	assert.Empty(t, attack(t))
	control(t, &switchUID, func(t *testing.T) { assert.Equal(t, "s3cret", attack(t)) })
}

// Per-user kernel quotas are the session uid's: a command holding many
// inotify instances must not exhaust root's on the host.
func TestRedTeamInotifyQuotaIsTheSessions(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is missing; fix: apt-get install python3")
	}
	attack := func(t *testing.T) error {
		s := rtSandbox(t, nil)
		task, err := s.StartBackground(context.Background(),
			`/usr/bin/python3 -c "import ctypes,time; l=ctypes.CDLL(None); fds=[l.inotify_init() for _ in range(4096)]; print('held', sum(f >= 0 for f in fds), flush=True); time.sleep(20)"`,
			sandbox.ExecOptions{})
		require.NoError(t, err)
		defer s.KillBackground(context.Background(), task.ID, true)
		waitBackground(s, task.ID, "held", 20*time.Second)
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	assert.NoError(t, attack(t))
	control(t, &switchUID, func(t *testing.T) { assert.ErrorIs(t, attack(t), unix.EMFILE) })
}

// A read-write mount holding the workspace (or SAGE_HOME) would let a
// command swap its workspace for a symlink to any host directory: refused.
func TestRedTeamWorkspaceSwapMountsAreRefused(t *testing.T) {
	parent := sandboxtest.TempDir(t)
	ws := filepath.Join(parent, "ws")
	_, err := NewWithOptions(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(t),
		Mounts: []sandbox.VolumeMount{{HostPath: parent, SandboxPath: "/data"}}}, Options{})
	var ce *sandbox.ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Contains(t, ce.Reason, "read-write")
	// Read-only is fine.
	require.NoError(t, os.Chmod(parent, 0o755))
	s, err := NewWithOptions(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(t),
		Mounts: []sandbox.VolumeMount{{HostPath: parent, SandboxPath: "/data", ReadOnly: true}}}, Options{})
	require.NoError(t, err)
	s.Close(context.Background())
}

// A workspace replaced by a symlink between two commands (however it
// happened) is never bound: the next command fails with fs.ErrPermission.
func TestRedTeamWorkspaceSwappedForASymlink(t *testing.T) {
	attack := func(t *testing.T) (string, error) {
		s := rtSandbox(t, nil)
		rtRun(t, s, "true", sandbox.ExecOptions{})
		ws := s.HostWorkspacePath()
		require.NoError(t, os.Rename(ws, ws+".old"))
		require.NoError(t, os.Symlink("/etc", ws))
		t.Cleanup(func() { os.Remove(ws); os.Rename(ws+".old", ws) })
		res, err := s.Exec(context.Background(), driver.ExecSpec{Command: "ls /workspace"})
		if err != nil {
			return "", err
		}
		return res.Stdout, nil
	}
	out, err := attack(t)
	assert.ErrorIs(t, err, fs.ErrPermission)
	assert.NotContains(t, out, "passwd")
	control(t, &isolation.BindWorkspaceFD, func(t *testing.T) {
		out, err := attack(t)
		require.NoError(t, err)
		assert.Contains(t, out, "passwd", "without the descriptor bind the symlink is followed")
	})
}

// Private by default: the workspace and runtime directory are 0700, and
// files made inside are 0600 (umask 077, configurable).
func TestRedTeamPrivateFiles(t *testing.T) {
	home := filepath.Join(sandboxtest.TempDir(t), "home")
	t.Setenv("SAGE_HOME", home)
	ws := filepath.Join(home, "sessions", "s1", "workspace")
	s := rtSandbox(t, func(c *sandbox.Config) {
		c.Workspace = ws
		c.RuntimeDir = filepath.Join(home, "sessions", "s1", "runtime")
	})
	res := rtRun(t, s, "umask; echo x > made", sandbox.ExecOptions{})
	assert.Equal(t, "0077\n", res.Stdout)
	mode := func(p string) fs.FileMode { fi, err := os.Stat(p); require.NoError(t, err); return fi.Mode().Perm() }
	assert.Equal(t, fs.FileMode(0o600), mode(filepath.Join(ws, "made")))
	assert.Equal(t, fs.FileMode(0o700), mode(ws))
	parents, runtimeMode := fs.FileMode(0o700), fs.FileMode(0o700)
	if os.Geteuid() == 0 {
		parents = 0o711     // searchable, not listable: each session uid passes through
		runtimeMode = 0o711 // root's: the session must not swap names root opens in it
		fi, err := os.Stat(s.RuntimeDir())
		require.NoError(t, err)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "the runtime directory is root's")
	}
	assert.Equal(t, runtimeMode, mode(s.RuntimeDir()))
	for _, p := range []string{home, filepath.Join(home, "sessions"), filepath.Join(home, "sessions", "s1")} {
		assert.Equal(t, parents, mode(p), p)
	}
	t.Run("control", func(t *testing.T) {
		s := rtSandbox(t, func(c *sandbox.Config) { c.Local.Umask = "022" })
		rtRun(t, s, "echo x > made", sandbox.ExecOptions{})
		assert.Equal(t, fs.FileMode(0o644), mode(filepath.Join(s.HostWorkspacePath(), "made")))
	})
}

// ExecOptions.Env must not appear on any host command line (every local
// user can read /proc/PID/cmdline).
func TestRedTeamEnvNotOnCommandLines(t *testing.T) {
	const secret = "s3cr3t-value-7f2a"
	attack := func(t *testing.T) bool {
		s := rtSandbox(t, nil)
		task, err := s.StartBackground(context.Background(), "echo started; sleep 20", sandbox.ExecOptions{Env: map[string]string{"SAGE_RT_SECRET": secret}})
		require.NoError(t, err)
		defer s.KillBackground(context.Background(), task.ID, true)
		waitBackground(s, task.ID, "started", 10*time.Second)
		ents, err := os.ReadDir("/proc")
		require.NoError(t, err)
		for _, e := range ents {
			if data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(data), secret) {
				return true
			}
		}
		return false
	}
	assert.False(t, attack(t), "the secret is on a host command line")
	control(t, &isolation.ArgsViaFD, func(t *testing.T) { assert.True(t, attack(t)) })
}

// What the host side writes for a session as root belongs to the
// session's uid, so the sandbox can change it.
func TestHostWritesBelongToTheSession(t *testing.T) {
	requireRoot(t)
	s := rtSandbox(t, nil)
	ctx := context.Background()
	require.NoError(t, s.WriteFile(ctx, "dir/sub/file.txt", []byte("v1"), sandbox.WriteOptions{}))
	res := rtRun(t, s, "echo v2 >> dir/sub/file.txt && mkdir dir/sub/more && cat dir/sub/file.txt", sandbox.ExecOptions{})
	assert.Equal(t, "v1v2\n", res.Stdout, res.Stderr)
	fi, err := os.Stat(filepath.Join(s.HostWorkspacePath(), "dir"))
	require.NoError(t, err)
	assert.Equal(t, uint32(s.ident.UID), fi.Sys().(*syscall.Stat_t).Uid)
}

// The seccomp filter is on every command: AF_VSOCK (not namespaced: with
// the network off it still reaches the hypervisor) and keyrings are out of
// reach; ordinary work is not.
func TestRedTeamSyscallFilter(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is missing; fix: apt-get install python3")
	}
	const probe = `/usr/bin/python3 -c "
import socket, errno
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print('vsock open')
except OSError as e:
    print('vsock', errno.errorcode[e.errno])
"`
	s := rtSandbox(t, nil)
	assert.Equal(t, "vsock EPERM\n", rtRun(t, s, probe, sandbox.ExecOptions{}).Stdout)
	res := rtRun(t, s, "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET).close(); print(1)' && git --version >/dev/null && echo ok", sandbox.ExecOptions{})
	assert.Equal(t, "1\nok\n", res.Stdout, res.Stderr)
	control(t, &isolation.UseSeccomp, func(t *testing.T) {
		assert.NotEqual(t, "vsock EPERM\n", rtRun(t, rtSandbox(t, nil), probe, sandbox.ExecOptions{}).Stdout)
	})
}

// An unknown system call name in the configuration is a one-line error.
func TestSeccompConfigUnknownName(t *testing.T) {
	_, err := NewWithOptions(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t),
		RuntimeDir: sandboxtest.TempDir(t), Local: sandbox.LocalConfig{SeccompDeny: []string{"no_such_call"}}}, Options{})
	var ce *sandbox.ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "sandbox.local.seccomp.deny", ce.Field)
	assert.NotContains(t, err.Error(), "\n")
}

// No set-user-ID or set-group-ID file can be made inside (the seccomp
// filter checks the mode of chmod and friends and of creating opens): one
// left in the workspace would run as the session's uid for any local user
// who reaches it.
func TestRedTeamNoSetIDFiles(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is missing; fix: apt-get install python3")
	}
	attack := func(t *testing.T) []string {
		s := rtSandbox(t, nil)
		rtRun(t, s, `cp /bin/sh ./a; chmod 4755 ./a; cp /bin/sh ./b; chmod g+s ./b; `+
			`/usr/bin/python3 -c "import os; os.close(os.open('c', os.O_CREAT|os.O_WRONLY, 0o4755)); os.chmod('c', 0o4755)"; true`, sandbox.ExecOptions{})
		var setid []string
		for _, n := range []string{"a", "b", "c"} {
			if fi, err := os.Stat(filepath.Join(s.HostWorkspacePath(), n)); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				setid = append(setid, n)
			}
		}
		return setid
	}
	assert.Empty(t, attack(t))
	control(t, &isolation.UseSeccomp, func(t *testing.T) { assert.NotEmpty(t, attack(t)) })
}

// Two workspaces never share a uid: a directory already owned by a live
// session's uid is refused for another workspace.
func TestRedTeamUIDOfAnotherWorkspaceIsRefused(t *testing.T) {
	requireRoot(t)
	a := rtSandbox(t, nil)
	other := filepath.Join(sandboxtest.TempDir(t), "other")
	require.NoError(t, os.Mkdir(other, 0o700))
	require.NoError(t, os.Chown(other, a.ident.UID, a.ident.GID))
	_, err := NewWithOptions(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: other, RuntimeDir: sandboxtest.TempDir(t)}, Options{})
	require.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), a.HostWorkspacePath())
}

// A mount that covers SAGE_HOME, read-only or not, or lies inside it
// outside a session's workspace, would show the sandbox the session
// daemons' sockets (a socket on a read-only mount still accepts a
// connect) and keys (#31, attack 5; TestSessionAttackMountCoversHome in
// cmd/sage runs the whole attack): refused, as is a workspace that covers
// SAGE_HOME. Control: with the check off the same mount is taken, and a
// session's workspace inside SAGE_HOME may be mounted.
func TestRedTeamMountsCoveringHomeAreRefused(t *testing.T) {
	parent := sandboxtest.TempDir(t)
	require.NoError(t, os.Chmod(parent, 0o755))
	home := filepath.Join(parent, "home")
	t.Setenv("SAGE_HOME", home)
	other := filepath.Join(home, "sessions", "other", "workspace")
	for _, d := range []string{filepath.Join(home, "sessions", "other", "daemon"), other} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.Chmod(home, 0o755))
	for _, d := range []string{filepath.Join(home, "sessions"), filepath.Join(home, "sessions", "other")} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	open := func(mounts []sandbox.VolumeMount, ws string) error {
		if ws == "" {
			ws = sandboxtest.TempDir(t)
		}
		s, err := NewWithOptions(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: sandboxtest.TempDir(t),
			Mounts: mounts}, Options{})
		if err == nil {
			s.Close(context.Background())
		}
		return err
	}
	refused := func(t *testing.T, err error, what string) {
		t.Helper()
		var ce *sandbox.ConfigError
		if assert.True(t, errors.As(err, &ce), "%s: %v", what, err) {
			assert.Contains(t, ce.Reason, "SAGE_HOME", what)
		}
	}
	for _, host := range []string{home, parent, filepath.Join(home, "sessions"), filepath.Join(home, "sessions", "other", "daemon")} {
		for _, ro := range []bool{true, false} {
			refused(t, open([]sandbox.VolumeMount{{HostPath: host, SandboxPath: "/h", ReadOnly: ro}}, ""), fmt.Sprintf("%s ro=%v", host, ro))
		}
	}
	var ce *sandbox.ConfigError
	err := open(nil, parent)
	if assert.True(t, errors.As(err, &ce), "a workspace over SAGE_HOME: %v", err) {
		assert.Equal(t, "sandbox.workspace", ce.Field)
	}
	assert.NoError(t, open([]sandbox.VolumeMount{{HostPath: other, SandboxPath: "/other", ReadOnly: true}}, ""),
		"another session's workspace may be mounted")
	control(t, &mountsCheckHome, func(t *testing.T) {
		assert.NoError(t, open([]sandbox.VolumeMount{{HostPath: home, SandboxPath: "/h", ReadOnly: true}}, ""))
	})
}
