package isolation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/bwrapargs"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
)

func TestGvisorSpec(t *testing.T) {
	s := GvisorSpec(GvisorOptions{Argv: []string{"/bin/sh", "-c", "true"}, Env: map[string]string{"B": "2", "A": "1"},
		Chdir: "/workspace", UID: 2000000001, GID: 2000000001, RootFS: "/r", Etc: true,
		System:    []bwrapargs.SystemPath{{Path: "/usr"}, {Path: "/bin", Symlink: "usr/bin"}},
		MaskFiles: []string{"/etc/shadow"}, MaskDirs: []string{"/etc/ssl/private"}, Empty: "/e",
		Workspace: bwrapargs.VolumeBind{Host: "/h/ws", Inside: "/workspace"},
		Mounts: []driver.VolumeMount{{HostPath: "/h/deep", SandboxPath: "/mnt/a/b", ReadOnly: true},
			{HostPath: "/h/top", SandboxPath: "/mnt/a"}},
		TmpBytes: 1 << 20, Rlimits: limits.Limits{Pids: 64, FileSizeBytes: 1 << 20}.Rlimits(false)})
	require.NotNil(t, s.Process)
	assert.Equal(t, []string{"A=1", "B=2"}, s.Process.Env, "sorted, so the spec is deterministic")
	assert.True(t, s.Process.NoNewPrivileges)
	assert.Empty(t, s.Process.Capabilities.Effective)
	assert.Empty(t, s.Process.Capabilities.Bounding)
	assert.NotZero(t, s.Process.User.UID)
	assert.True(t, s.Root.Readonly)
	rl := map[string]uint64{}
	for _, r := range s.Process.Rlimits {
		rl[r.Type] = r.Hard
	}
	assert.Equal(t, map[string]uint64{"RLIMIT_CORE": 0, "RLIMIT_NPROC": 64, "RLIMIT_FSIZE": 1 << 20}, rl)
	idx := map[string]int{}
	for i, m := range s.Mounts {
		idx[m.Destination] = i
		switch m.Destination {
		case "/usr", "/etc", "/etc/shadow", "/mnt/a/b":
			assert.Contains(t, m.Options, "ro", m.Destination)
		case "/workspace", "/mnt/a":
			assert.Contains(t, m.Options, "rw", m.Destination)
		case "/tmp":
			assert.Contains(t, m.Options, "size=1048576")
		}
	}
	assert.NotContains(t, idx, "/bin", "a symlink lives in the skeleton root, not as a mount")
	assert.Less(t, idx["/etc"], idx["/etc/shadow"], "the mask covers /etc's file")
	assert.Equal(t, "/e", s.Mounts[idx["/etc/shadow"]].Source)
	assert.Less(t, idx["/mnt/a"], idx["/mnt/a/b"], "a nested mount comes after its parent")
	assert.Less(t, idx["/etc"], idx["/workspace"])
}
