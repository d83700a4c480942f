//go:build linux

package limits

import (
	"errors"
	"fmt"
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
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func TestRootWithoutCgroupsRefusesAPidsLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root is exempt from RLIMIT_NPROC")
	}
	saved := cgroupRoot
	cgroupRoot = sandboxtest.TempDir(t) // no hierarchy here
	defer func() { cgroupRoot = saved }()
	_, err := NewCgroups("t1", Limits{Pids: 10})
	require.Error(t, err)
	assert.True(t, errors.Is(err, sandbox.ErrIsolationUnavailable))
	assert.Contains(t, err.Error(), "pids_limit: -1")
	c, err := NewCgroups("t1", Limits{MemoryBytes: 1 << 20})
	require.NoError(t, err, "memory falls back to RLIMIT_AS")
	assert.Nil(t, c)
	assert.False(t, c.Memory())
}

func TestCgroupsAreRemovedOnClose(t *testing.T) {
	c, err := NewCgroups("t2", Limits{Pids: 10, MemoryBytes: 64 << 20})
	if err != nil || c == nil {
		t.Skipf("no writable cgroups here (%v)", err)
	}
	dirs := append([]string{}, c.dirs...)
	require.NotEmpty(t, dirs)
	for _, d := range dirs {
		assert.True(t, strings.Contains(d, "sage-t2-"), d)
		assert.DirExists(t, d)
	}
	require.NoError(t, c.Remove())
	require.NoError(t, c.Remove(), "remove is idempotent")
	assert.ErrorIs(t, c.Join(os.Getpid()), sandbox.ErrClosed, "a command racing with Close is refused")
	assert.True(t, c.Memory(), "and is not started without RLIMIT_AS either")
	for _, d := range dirs {
		assert.NoDirExists(t, d)
	}
}

func TestTrampoline(t *testing.T) {
	var none *Cgroups
	path, argv, err := none.Trampoline("/usr/bin/bwrap", []string{"--a", "b"})
	assert.NoError(t, err)
	assert.Equal(t, "/usr/bin/bwrap", path)
	assert.Equal(t, []string{"/usr/bin/bwrap", "--a", "b"}, argv)
	c := &Cgroups{procs: []string{"/cg/p/cgroup.procs", "/cg/m/cgroup.procs"}}
	path, argv, err = c.Trampoline("/usr/bin/bwrap", []string{"--a"})
	assert.NoError(t, err)
	assert.Equal(t, "/bin/sh", path)
	assert.Equal(t, []string{"sh", "-c",
		`echo $$ > "$1" || { echo "sage: cannot join cgroup $1" >&2; exit 125; }; echo $$ > "$2" || { echo "sage: cannot join cgroup $2" >&2; exit 125; }; shift 2; exec "$@"`,
		"sage-cgroup", "/cg/p/cgroup.procs", "/cg/m/cgroup.procs", "/usr/bin/bwrap", "--a"}, argv)
}

// Where no cgroup can be made, a CPU time limit and an explicit memory
// limit would hold per process only: they are refused, each with its fix;
// the default memory limit falls back to RLIMIT_AS, reported as such.
func TestNoCgroupRefusesWholeCommandLimits(t *testing.T) {
	saved := cgroupRoot
	cgroupRoot = sandboxtest.TempDir(t) // no hierarchy here
	defer func() { cgroupRoot = saved }()
	_, err := NewCgroups("t3", Limits{CPUTime: time.Second})
	require.Error(t, err)
	assert.ErrorIs(t, err, sandbox.ErrIsolationUnavailable)
	assert.Contains(t, err.Error(), "cpu_time_limit: 0")
	l := Resolve(sandbox.LocalConfig{MemoryLimitMB: 64, PidsLimit: -1})
	_, err = NewCgroups("t3", l)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "memory_limit_mb: -1")
	l = Resolve(sandbox.LocalConfig{PidsLimit: -1})
	c, err := NewCgroups("t3", l)
	require.NoError(t, err, "the default memory limit falls back to RLIMIT_AS")
	assert.Nil(t, c)
	assert.Equal(t, driver.EnforcedPerProcess, l.Enforced(c, true).Memory, "and says so")
	assert.Equal(t, driver.EnforcedNone, l.Enforced(c, true).CPUTime)
}

// The CPU budget in cgroup v2 (cpu.stat, cgroup.kill), on the unified
// hierarchy where this host has one (without controllers: cpu.stat counts
// usage without them).
func TestCPUBudgetCgroupV2(t *testing.T) {
	const unified = "/sys/fs/cgroup/unified"
	if _, err := os.Stat(unified + "/cgroup.controllers"); err != nil || os.Geteuid() != 0 {
		t.Skip("no cgroup v2 hierarchy to write to beside v1 here")
	}
	if b, _ := os.ReadFile("/proc/self/cgroup"); !strings.Contains(string(b), "\n0::/\n") && !strings.HasPrefix(string(b), "0::/\n") {
		t.Skip("not in the root of the v2 hierarchy")
	}
	saved := cgroupRoot
	cgroupRoot = unified
	defer func() { cgroupRoot = saved }()
	c, err := NewCgroups("t4", Limits{CPUTime: 300 * time.Millisecond})
	require.NoError(t, err)
	require.NotNil(t, c)
	require.True(t, c.cpuV2)
	k, err := c.Command(300 * time.Millisecond)
	require.NoError(t, err)
	busy := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, busy.Start())
	require.NoError(t, k.Start(busy.Process.Pid))
	done := make(chan error, 1)
	go func() { done <- busy.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		busy.Process.Kill()
		t.Fatal("the busy loop outlived its 300 ms budget")
	}
	res := &sandbox.CommandResult{ExitCode: 137}
	k.End(res)
	assert.True(t, res.CPUTimeExceeded)
	assert.Equal(t, 152, res.ExitCode)
	used, err := k.used()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, used, 300*time.Millisecond)
	assert.Less(t, used, 2*time.Second)
	k.Release()
	assert.NoDirExists(t, k.dir)
	require.NoError(t, c.Remove())
	assert.NoDirExists(t, c.cpuParent)
}

// Issue 35, item 5: kill -9 of a sage with limits leaves its cgroups
// (empty: its commands died with it), and later runs did not sweep them.
// A dead owner's empty cgroups, nested ones included, are swept; a live
// owner's (this process's) and an untagged one (an older version's) are
// not, nor one something still runs in.
func TestDeadOwnersCgroupsAreSwept(t *testing.T) {
	own, err := ownCgroups()
	require.NoError(t, err)
	p, ok := own["pids"]
	parent := filepath.Join(cgroupRoot, "pids", p)
	if !ok || fileExists(filepath.Join(cgroupRoot, "cgroup.controllers")) || syscall.Access(parent, 2) != nil {
		testenv.Missing(t, "a writable cgroup v1 pids hierarchy", "run the tests as root on a cgroup v1 machine, as CI does")
	}
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	ns := pidNS()
	mk := func(name string) string {
		dir := filepath.Join(parent, name)
		require.NoError(t, os.Mkdir(dir, 0o755))
		t.Cleanup(func() { _ = syscall.Rmdir(filepath.Join(dir, "cmd-1")); _ = syscall.Rmdir(dir) })
		return dir
	}
	gone := mk(fmt.Sprintf("sage-t5-o%d_1_%d-%s", dead.Process.Pid, ns, randomSuffix()))
	require.NoError(t, os.Mkdir(filepath.Join(gone, "cmd-1"), 0o755))
	mine := mk("sage-t5-" + ownerTag() + "-" + randomSuffix())
	untagged := mk("sage-t5-" + randomSuffix())
	busy := mk(fmt.Sprintf("sage-t5-o%d_1_%d-%s", dead.Process.Pid, ns, randomSuffix()))
	sleeper := exec.Command("sleep", "60")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	require.NoError(t, os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0))

	sweepDead()
	assert.NoDirExists(t, gone, "a dead owner's empty cgroup was left")
	assert.DirExists(t, mine, "a live owner's cgroup was removed")
	assert.DirExists(t, untagged, "an untagged cgroup was removed")
	assert.DirExists(t, busy, "a cgroup something runs in was removed")
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
}
