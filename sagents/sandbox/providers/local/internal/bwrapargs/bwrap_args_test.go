package bwrapargs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox"
)

// TestBwrapArgsOrder pins the argument list: changing the order of
// isolation flags must be a conscious decision.
func TestBwrapArgsOrder(t *testing.T) {
	got := Args(Options{
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
	got := Args(Options{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace", AsPID1: true, InfoFD: 3})
	assert.Equal(t, []string{"--die-with-parent", "--new-session", "--as-pid-1", "--info-fd", "3"}, got[3:8])
	assert.NotContains(t, Args(Options{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace"}), "--as-pid-1")
}

func TestBwrapArgsNetwork(t *testing.T) {
	off := Args(Options{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace"})
	assert.NotContains(t, off, "--share-net")
	on := Args(Options{Network: true, Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace"})
	assert.Equal(t, []string{"--unshare-all", "--unshare-user", "--share-net", "--disable-userns"}, on[:4])
}

func TestMountsShallowestFirst(t *testing.T) {
	args := Args(Options{Workspace: VolumeBind{"/w", "/workspace"}, Chdir: "/workspace",
		Mounts: []sandbox.VolumeMount{{HostPath: "/x", SandboxPath: "/a/b"}, {HostPath: "/y", SandboxPath: "/a"}}})
	joined := strings.Join(args, " ")
	assert.Less(t, strings.Index(joined, "--bind /y /a "), strings.Index(joined, "--bind /x /a/b"), joined)
}
