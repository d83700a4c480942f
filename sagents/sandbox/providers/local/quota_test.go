//go:build linux

package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// quotaWorkspace is a workspace whose image (<ws>.img) lands inside the
// test's temporary directory. Its cleanup unmounts whatever a failed test
// left on it (the loop device detaches itself then).
func quotaWorkspace(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(sandboxtest.TempDir(t), "ws")
	t.Cleanup(func() {
		for mountedAt(t, ws) {
			if err := unix.Unmount(ws, unix.MNT_DETACH); err != nil {
				t.Errorf("cleanup: umount %s: %v", ws, err)
				return
			}
		}
	})
	return ws
}

// requireQuota fails (or skips with SAGE_TEST_ALLOW_SKIP=1) when this
// root process lacks loop devices or mkfs.ext4.
func requireQuota(t *testing.T) {
	t.Helper()
	requireBwrap(t)
	testenv.Command(t, "mkfs.ext4", testenv.SetupFix+" (apt-get install e2fsprogs)")
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testenv.Missing(t, "/dev/loop-control", "modprobe loop")
	}
}

func quotaConfig(ws, id string, mb, inodes int) sandbox.Config {
	return sandbox.Config{Mode: sandbox.Local, SandboxID: id, Workspace: ws,
		Local: sandbox.LocalConfig{DiskQuotaMB: mb, DiskQuotaInodes: inodes}}
}

func newQuota(t *testing.T, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	if cfg.RuntimeDir == "" {
		cfg.RuntimeDir = sandboxtest.TempDir(t)
	}
	h, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func qrun(t *testing.T, s *sandbox.Sandbox, cmd string) *sandbox.CommandResult {
	t.Helper()
	res, err := s.ExecuteCommand(context.Background(), cmd, sandbox.ExecOptions{Timeout: time.Minute})
	require.NoError(t, err)
	return res
}

// mountedAt reports whether something is mounted on p.
func mountedAt(t *testing.T, p string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == p {
			return true
		}
	}
	return false
}

// loopsOf lists the loop devices backed by img.
func loopsOf(t *testing.T, img string) []string {
	t.Helper()
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(string(b), img) {
			out = append(out, f)
		}
	}
	return out
}

// requireNothingLeft checks that no mount is on ws and no loop device
// holds its image (a loop device detaches once the last mount namespace
// holding it is gone: give it a moment).
func requireNothingLeft(t *testing.T, ws string) {
	t.Helper()
	require.False(t, mountedAt(t, ws), "a file system is still mounted on %s", ws)
	deadline := time.Now().Add(30 * time.Second) // a loaded machine flushes the file system slowly
	for len(loopsOf(t, ws+".img")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a loop device still holds %s.img; mount namespaces still holding %s: %s", ws, ws, holders(ws))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holders names the processes whose mount namespace still has something
// mounted at or below ws (for the failure message).
func holders(ws string) string {
	var out []string
	pids, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), ws) {
			continue
		}
		dir := filepath.Dir(p)
		comm, _ := os.ReadFile(dir + "/comm")
		ns, _ := os.Readlink(dir + "/ns/mnt")
		out = append(out, fmt.Sprintf("%s(%s %s)", filepath.Base(dir), strings.TrimSpace(string(comm)), ns))
	}
	if len(out) == 0 {
		return "none (the loop device is held by an open file, or the kernel is still flushing it)"
	}
	return strings.Join(out, ", ")
}

// TestDiskQuotaEnforced: as root, a workspace with a quota is its own file
// system of that size: a command writing past it, a command making too
// many files and the host file API all get ENOSPC; a later sandbox of the
// same session sees the files; Close leaves no mount and no loop device.
// As an ordinary user the quota is refused.
func TestDiskQuotaEnforced(t *testing.T) {
	ws := quotaWorkspace(t)
	cfg := quotaConfig(ws, "quota-test", 32, 256)
	if os.Geteuid() != 0 {
		requireBwrap(t)
		_, err := sandbox.New(context.Background(), cfg)
		var ce *sandbox.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, err.Error(), "not root")
		require.Contains(t, err.Error(), "fix:")
		enforced, detail := local.DiskQuotaSummary()
		require.False(t, enforced, detail)
		return
	}
	requireQuota(t)
	enforced, detail := local.DiskQuotaSummary()
	require.True(t, enforced, detail)
	ctx := context.Background()
	s := newQuota(t, cfg)
	require.True(t, mountedAt(t, ws))

	res := qrun(t, s, "df -k . | tail -1; dd if=/dev/zero of=big bs=1M count=48; echo rc=$?")
	fields := strings.Fields(strings.SplitN(res.Stdout, "\n", 2)[0])
	require.GreaterOrEqual(t, len(fields), 2, res.Stdout)
	var kb int
	fmt.Sscan(fields[1], &kb)
	assert.True(t, kb > 20<<10 && kb <= 32<<10, "df inside says %d KB: %s", kb, res.Stdout)
	assert.NotContains(t, res.Stdout, "rc=0", "writing 48 MB into a 32 MB quota succeeded")
	assert.Contains(t, res.Stderr, "No space left on device")

	res = qrun(t, s, "rm -f big; for i in $(seq 1 1000); do touch f$i || { echo stopped at $i; break; }; done; ls | wc -l")
	assert.Contains(t, res.Stdout, "stopped at", "1000 files fit under a 256-inode quota")
	assert.Contains(t, res.Stderr, "No space left on device")
	qrun(t, s, "rm -f f*")

	err := s.WriteFile(ctx, "host-big", make([]byte, 40<<20), sandbox.WriteOptions{})
	require.Error(t, err, "the host file API wrote 40 MB into a 32 MB quota")
	assert.True(t, errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left"), "%v", err)
	s.DeleteFile(ctx, "host-big")

	require.NoError(t, s.WriteFile(ctx, "kept.txt", []byte("still here"), sandbox.WriteOptions{}))
	res = qrun(t, s, "echo inside > inside.txt; stat -c %u inside.txt")
	require.NoError(t, s.Close(ctx))
	requireNothingLeft(t, ws)
	require.FileExists(t, ws+".img", "a named session keeps its image")

	s2 := newQuota(t, cfg)
	res = qrun(t, s2, "cat kept.txt inside.txt")
	assert.Equal(t, "still hereinside\n", res.Stdout, res.Stderr)
	require.NoError(t, s2.Close(ctx))
	requireNothingLeft(t, ws)
}

// TestDiskQuotaControl: the same write without a quota succeeds, so the
// test above detects a quota that does not hold.
func TestDiskQuotaControl(t *testing.T) {
	requireBwrap(t)
	s := newQuota(t, quotaConfig(quotaWorkspace(t), "", 0, 0))
	res := qrun(t, s, "dd if=/dev/zero of=big bs=1M count=48 2>/dev/null; echo rc=$?; for i in $(seq 1 1000); do touch f$i || break; done; ls | wc -l")
	assert.Contains(t, res.Stdout, "rc=0")
	assert.Contains(t, res.Stdout, "1001")
}

// TestDiskQuotaAnonymousRemovesImage: an anonymous sandbox's image goes
// with it.
func TestDiskQuotaAnonymousRemovesImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root; TestDiskQuotaEnforced checks the refusal as an ordinary user")
	}
	requireQuota(t)
	ws := quotaWorkspace(t)
	s := newQuota(t, quotaConfig(ws, "", 16, 0))
	require.FileExists(t, ws+".img")
	qrun(t, s, "echo x > f")
	require.NoError(t, s.Close(context.Background()))
	requireNothingLeft(t, ws)
	require.NoFileExists(t, ws+".img")
}

// TestDiskQuotaFailuresLeaveNothing: each way New can fail with a quota
// leaves no mount, no loop device and no image it made.
func TestDiskQuotaFailuresLeaveNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root; TestDiskQuotaEnforced checks the refusal as an ordinary user")
	}
	requireQuota(t)
	ctx := context.Background()
	newErr := func(cfg sandbox.Config) error {
		cfg.RuntimeDir = sandboxtest.TempDir(t)
		h, err := sandbox.New(ctx, cfg)
		if err == nil {
			h.Close(ctx)
		}
		return err
	}

	t.Run("workspace with files", func(t *testing.T) {
		ws := quotaWorkspace(t)
		s := newQuota(t, quotaConfig(ws, "q1", 0, 0)) // the session ran without a quota first
		qrun(t, s, "touch f")
		require.NoError(t, s.Close(ctx))
		err := newErr(quotaConfig(ws, "q1", 16, 0))
		require.ErrorIs(t, err, os.ErrExist)
		require.Contains(t, err.Error(), "fix:")
		requireNothingLeft(t, ws)
		require.NoFileExists(t, ws+".img")
		require.FileExists(t, filepath.Join(ws, "f"))
	})
	t.Run("later failure in New, named and anonymous", func(t *testing.T) {
		for _, id := range []string{"q2", ""} {
			ws := quotaWorkspace(t)
			cfg := quotaConfig(ws, id, 16, 0)
			cfg.Mounts = []sandbox.VolumeMount{{HostPath: "/nonexistent-sage-quota", SandboxPath: "/x"}}
			var ce *sandbox.ConfigError
			require.ErrorAs(t, newErr(cfg), &ce)
			requireNothingLeft(t, ws)
			require.NoFileExists(t, ws+".img")
		}
	})
	t.Run("size differs from the image", func(t *testing.T) {
		ws := quotaWorkspace(t)
		s := newQuota(t, quotaConfig(ws, "q3", 16, 0))
		require.NoError(t, s.Close(ctx))
		err := newErr(quotaConfig(ws, "q3", 24, 0))
		var ce *sandbox.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, err.Error(), "set disk_quota_mb to 16")
		requireNothingLeft(t, ws)
		require.FileExists(t, ws+".img", "the session's files are kept")
	})
	t.Run("in use by another sandbox", func(t *testing.T) {
		ws := quotaWorkspace(t)
		s := newQuota(t, quotaConfig(ws, "q4", 16, 0))
		qrun(t, s, "echo a > a")
		err := newErr(quotaConfig(ws, "q4", 16, 0))
		require.Error(t, err)
		require.Contains(t, err.Error(), "in use by another sandbox")
		assert.Equal(t, "a\n", qrun(t, s, "cat a").Stdout, "the first sandbox keeps its file system")
		require.NoError(t, s.Close(ctx))
		requireNothingLeft(t, ws)
	})
	t.Run("bad config", func(t *testing.T) {
		for _, c := range []sandbox.LocalConfig{{DiskQuotaMB: 8}, {DiskQuotaMB: -1}, {DiskQuotaInodes: 100}} {
			cfg := quotaConfig(quotaWorkspace(t), "", c.DiskQuotaMB, c.DiskQuotaInodes)
			var ce *sandbox.ConfigError
			require.ErrorAs(t, cfg.Validate(), &ce, "%+v", c)
		}
	})
}

// TestDiskQuotaTakesOverALeftMount: a sandbox that died without Close
// leaves its file system mounted; the next sandbox of the session takes
// it over (and its Close cleans up).
func TestDiskQuotaTakesOverALeftMount(t *testing.T) {
	if ws := os.Getenv("SAGE_TEST_QUOTA_DIE"); ws != "" { // the sandbox that dies
		s, err := sandbox.New(context.Background(), quotaConfig(ws, "q5", 16, 0))
		if err == nil {
			_, err = s.ExecuteCommand(context.Background(), "echo left > left.txt", sandbox.ExecOptions{})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root; TestDiskQuotaEnforced checks the refusal as an ordinary user")
	}
	requireQuota(t)
	ws := quotaWorkspace(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDiskQuotaTakesOverALeftMount$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SAGE_TEST_QUOTA_DIE="+ws, "SAGE_HOME="+sandboxtest.TempDir(t))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, mountedAt(t, ws), "the dead sandbox left no mount: nothing to take over")

	s := newQuota(t, quotaConfig(ws, "q5", 16, 0))
	assert.Equal(t, "left\n", qrun(t, s, "cat left.txt").Stdout)
	require.NoError(t, s.Close(context.Background()))
	requireNothingLeft(t, ws)
}
