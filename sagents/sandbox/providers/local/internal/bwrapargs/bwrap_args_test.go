package local

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox"
)

// TestBwrapArgsOrder pins the argument list: changing the order of
// isolation flags must be a conscious decision.
func TestBwrapArgsOrder(t *testing.T) {
	got := BwrapArgs(BwrapOptions{
		Env:       map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/workspace"},
		System:    []SystemPath{{Path: "/usr"}, {Path: "/bin", Symlink: "usr/bin"}},
		Etc:       true,
		MaskFiles: []string{"/etc/shadow"},
		MaskDirs:  []string{"/etc/ssl/private"},
		ReadOnly:  []string{"/opt/python"},
		TmpBytes:  1 << 20,
		ShmBytes:  1 << 16,
		Workspace: VolumeBind{Host: "/tmp/ws", Inside: "/workspace"},
		Mounts: []sandbox.VolumeMount{{HostPath: "/data", SandboxPath: "/mnt/data", ReadOnly: true}, {HostPath: "/out", SandboxPath: "/tmp/out"},
			{HostPath: "/rt/venv", SandboxPath: "/opt/sage-venv"}},
		Chdir:   "/workspace/sub",
		InfoFD:  3,
		BlockFD: 4,
	})
	want := strings.Fields(`--unshare-all --unshare-user --disable-userns --die-with-parent --new-session --info-fd 3 --block-fd 4
		--clearenv --setenv HOME /workspace --setenv PATH /usr/bin:/bin --cap-drop ALL
		--ro-bind /usr /usr --symlink usr/bin /bin
		--ro-bind /etc /etc --ro-bind /dev/null /etc/shadow --tmpfs /etc/ssl/private --remount-ro /etc/ssl/private
		--proc /proc --dev /dev --size 65536 --tmpfs /dev/shm --remount-ro /dev --size 1048576 --tmpfs /tmp
		--ro-bind /opt/python /opt/python
		--bind /tmp/ws /workspace --ro-bind /data /mnt/data --bind /out /tmp/out --bind /rt/venv /opt/sage-venv
		--remount-ro / --chdir /workspace/sub`)
	assert.Equal(t, want, got)
}

// TestBwrapArgsAsPID1: the session sandbox's supervisor is its pid 1.
func TestBwrapArgsAsPID1(t *testing.T) {
	got := BwrapArgs(BwrapOptions{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace", AsPID1: true, InfoFD: 3})
	assert.Equal(t, []string{"--die-with-parent", "--new-session", "--as-pid-1", "--info-fd", "3"}, got[3:8])
	assert.NotContains(t, BwrapArgs(BwrapOptions{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace"}), "--as-pid-1")
}

func TestBwrapArgsNetwork(t *testing.T) {
	off := BwrapArgs(BwrapOptions{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace"})
	assert.NotContains(t, off, "--share-net")
	on := BwrapArgs(BwrapOptions{Network: true, Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace"})
	assert.Equal(t, []string{"--unshare-all", "--unshare-user", "--share-net", "--disable-userns"}, on[:4])
}

func TestPrlimitArgs(t *testing.T) {
	l := Limits{CPUTime: 1500e6, MemoryBytes: 64 << 20, Pids: 32, FileSizeBytes: 1 << 20}
	assert.Equal(t, []string{"--core=0:0", "--cpu=3:4", "--as=67108864:67108864", "--fsize=1048576:1048576", "--nproc=32:32"}, l.prlimitArgs(false))
	assert.Equal(t, []string{"--core=0:0", "--cpu=3:4", "--fsize=1048576:1048576", "--nproc=32:32"}, l.prlimitArgs(true))
	assert.Equal(t, []string{"--core=0:0"}, Limits{}.prlimitArgs(false))
	assert.Equal(t, "ulimit -c 0 && ulimit -t 2 && ulimit -v 65536 && ulimit -f 2048 && ulimit -u 32", l.ulimitScript())
}

func TestResolveLimits(t *testing.T) {
	l := ResolveLimits(sandbox.LocalConfig{})
	assert.EqualValues(t, DefaultMemoryLimitMB<<20, l.MemoryBytes)
	assert.Equal(t, DefaultPidsLimit, l.Pids)
	assert.EqualValues(t, DefaultFileSizeLimitMB<<20, l.FileSizeBytes)
	assert.Zero(t, l.CPUTime)
	l = ResolveLimits(sandbox.LocalConfig{MemoryLimitMB: -1, PidsLimit: -1, FileSizeLimitMB: 10})
	assert.Zero(t, l.MemoryBytes)
	assert.Zero(t, l.Pids)
	assert.EqualValues(t, 10<<20, l.FileSizeBytes)
	assert.EqualValues(t, MaxTmpMB<<20, l.TmpBytes)
	assert.EqualValues(t, MaxShmMB<<20, l.ShmBytes)
	l = ResolveLimits(sandbox.LocalConfig{})
	assert.EqualValues(t, MaxTmpMB<<20, l.TmpBytes, "the default memory limit leaves /tmp its own bound")
	assert.EqualValues(t, MaxShmMB<<20, l.ShmBytes)
	l = ResolveLimits(sandbox.LocalConfig{MemoryLimitMB: 100})
	assert.EqualValues(t, 50<<20, l.TmpBytes, "/tmp is memory: at most half the memory limit")
	assert.EqualValues(t, 25<<20, l.ShmBytes, "/dev/shm is memory: at most a quarter of the memory limit")
}

func TestMountsShallowestFirst(t *testing.T) {
	args := BwrapArgs(BwrapOptions{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace",
		Mounts: []sandbox.VolumeMount{{HostPath: "/x", SandboxPath: "/a/b"}, {HostPath: "/y", SandboxPath: "/a"}}})
	joined := strings.Join(args, " ")
	assert.Less(t, strings.Index(joined, "--bind /y /a "), strings.Index(joined, "--bind /x /a/b"), joined)
}
