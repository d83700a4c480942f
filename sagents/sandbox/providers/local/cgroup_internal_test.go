//go:build linux

package local

import (
	"errors"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
)

func TestRootWithoutCgroupsRefusesAPidsLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root is exempt from RLIMIT_NPROC")
	}
	saved := cgroupRoot
	cgroupRoot = sandboxtest.TempDir(t) // no hierarchy here
	defer func() { cgroupRoot = saved }()
	_, err := limitCgroups("t1", Limits{Pids: 10})
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandbox.ErrIsolationUnavailable))
	assert.Contains(t, err.Error(), "pids_limit: -1")
	c, err := limitCgroups("t1", Limits{MemoryBytes: 1 << 20})
	require.NoError(t, err, "memory falls back to RLIMIT_AS")
	assert.Nil(t, c)
	assert.False(t, c.memory())
}

func TestCgroupsAreRemovedOnClose(t *testing.T) {
	c, err := limitCgroups("t2", Limits{Pids: 10, MemoryBytes: 64 << 20})
	if err != nil || c == nil {
		t.Skipf("no writable cgroups here (%v)", err)
	}
	dirs := append([]string{}, c.dirs...)
	require.NotEmpty(t, dirs)
	for _, d := range dirs {
		assert.True(t, strings.Contains(d, "sage-t2-"), d)
		assert.DirExists(t, d)
	}
	require.NoError(t, c.remove())
	require.NoError(t, c.remove(), "remove is idempotent")
	assert.ErrorIs(t, c.join(os.Getpid()), sandbox.ErrClosed, "a command racing with Close is refused")
	assert.True(t, c.memory(), "and is not started without RLIMIT_AS either")
	for _, d := range dirs {
		assert.NoDirExists(t, d)
	}
}

func TestTrampoline(t *testing.T) {
	var none *cgroupSet
	path, argv, err := none.trampoline("/usr/bin/bwrap", []string{"--a", "b"})
	assert.NoError(t, err)
	assert.Equal(t, "/usr/bin/bwrap", path)
	assert.Equal(t, []string{"/usr/bin/bwrap", "--a", "b"}, argv)
	c := &cgroupSet{procs: []string{"/cg/p/cgroup.procs", "/cg/m/cgroup.procs"}}
	path, argv, err = c.trampoline("/usr/bin/bwrap", []string{"--a"})
	assert.NoError(t, err)
	assert.Equal(t, "/bin/sh", path)
	assert.Equal(t, []string{"sh", "-c",
		`echo $$ > "$1" || { echo "sage: cannot join cgroup $1" >&2; exit 125; }; echo $$ > "$2" || { echo "sage: cannot join cgroup $2" >&2; exit 125; }; shift 2; exec "$@"`,
		"sage-cgroup", "/cg/p/cgroup.procs", "/cg/m/cgroup.procs", "/usr/bin/bwrap", "--a"}, argv)
}
