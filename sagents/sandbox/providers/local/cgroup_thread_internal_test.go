//go:build linux

package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// threadSandbox is a sandbox (a session one unless mutate says
// fresh_per_command) with pids and memory cgroups, its cgroup thread in
// them. Without writable cgroups it fails t as root (unless
// SAGE_TEST_ALLOW_SKIP=1) and skips it otherwise, as the package's other
// cgroup tests do; on cgroup v2 it checks that there is no thread (the
// gate joins there) and skips the rest.
func threadSandbox(t *testing.T, mutate ...func(*sandbox.Config)) (*Sandbox, *limits.Cgroups) {
	t.Helper()
	probe, err := limits.ProbeCgroups(Limits{Pids: 64, MemoryBytes: 256 << 20})
	writable := err == nil && probe.PidsAndMemory()
	probe.Remove()
	if !writable {
		if os.Geteuid() == 0 && !testenv.SkipAllowed() {
			t.Fatalf("running as root without writable pids and memory cgroups (%v); set SAGE_TEST_ALLOW_SKIP=1 to skip", err)
		}
		t.Skipf("no writable pids and memory cgroups here (%v)", err)
	}
	sup, err := testenv.SupervisorBinary()
	require.NoError(t, err)
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	cfg.Local.MemoryLimitMB, cfg.Local.PidsLimit = 256, 64
	for _, m := range mutate {
		m(&cfg)
	}
	opts := Options{}
	if cfg.Local.FreshPerCommand == nil || !*cfg.Local.FreshPerCommand {
		opts.Session = SessionOptions{Supervisor: sup}
	}
	s, err := NewWithOptions(t.Context(), cfg, opts)
	require.NoError(t, err, "a memory and a pids limit need writable cgroups")
	b, ok := s.iso.(*isolation.Bwrap)
	require.True(t, ok, "bwrap isolation")
	require.NotNil(t, b.Cgroups())
	started, err := b.Cgroups().WaitThread(limits.ThreadJoinTimeout)
	if limits.V2() {
		require.False(t, started, "cgroup v2 moves whole processes: no cgroup thread")
		s.Close(t.Context())
		t.Skip("cgroup v2: no cgroup thread (checked); the gate joins bwrap's child as before")
	}
	require.True(t, started, "a bwrap sandbox with v1 cgroups starts its cgroup thread")
	require.NoError(t, err, "the cgroup thread did not join")
	return s, b.Cgroups()
}

// bornInside says whether process pid is in every cgroup of c.
func bornInside(c *limits.Cgroups, pid int) bool {
	return limits.InCgroups("/proc/"+strconv.Itoa(pid)+"/cgroup", c.Procs()) == nil
}

// A session sandbox's bwrap is born in the sandbox's cgroups, forked by
// the cgroup thread: the outer bwrap process itself is in them, which a
// join at the gate (of bwrap's sandbox child only) never does. Control:
// with the thread stopped, the same start leaves the outer bwrap outside
// (the gate joins its child), so the check tells the two apart.
func TestCgroupThreadForksBwrapInside(t *testing.T) {
	s, cg := threadSandbox(t)
	res, err := s.Exec(t.Context(), driver.ExecSpec{Command: "true"})
	require.NoError(t, err)
	require.True(t, res.Success, res)
	assert.True(t, bornInside(cg, s.SessionPID()), "the session's bwrap was not born in the sandbox's cgroups")
	for _, p := range cg.Procs() {
		if f := filepath.Join(filepath.Dir(p), "pids.max"); fileExists(f) {
			b, _ := os.ReadFile(f)
			assert.Equal(t, strconv.Itoa(64+sessionTaskReserve+1), strings.TrimSpace(string(b)),
				"pids.max is the limit, the supervisor's reserve and the thread")
		}
	}
	procs, _ := os.ReadFile(cg.Procs()[0])
	assert.Contains(t, strings.Fields(string(procs)), strconv.Itoa(os.Getpid()), "the thread is this process's")
	dirs := cg.Dirs()
	require.NoError(t, s.Close(t.Context()))
	for _, d := range dirs {
		assert.NoDirExists(t, d, "Close ends the thread and removes the cgroups (without killing this process)")
	}

	s, cg = threadSandbox(t) // control
	require.NoError(t, cg.StopThread())
	res, err = s.Exec(t.Context(), driver.ExecSpec{Command: "true"})
	require.NoError(t, err)
	require.True(t, res.Success, res)
	assert.False(t, bornInside(cg, s.SessionPID()), "control: without the thread the outer bwrap stays outside")
	require.NoError(t, s.Close(t.Context()))
}

// With fresh_per_command every command's bwrap is born in the cgroups
// too (a background task's is the one still running to look at).
func TestCgroupThreadForksFreshBwrapInside(t *testing.T) {
	fresh := true
	s, cg := threadSandbox(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh })
	defer s.Close(t.Context())
	require.False(t, s.SessionEnabled())
	res, err := s.Exec(t.Context(), driver.ExecSpec{Command: "true"})
	require.NoError(t, err)
	require.True(t, res.Success, res)
	task, err := s.StartBackground(t.Context(), "sleep 30", sandbox.ExecOptions{})
	require.NoError(t, err)
	defer s.KillBackground(t.Context(), task.ID, true)
	assert.True(t, bornInside(cg, task.PID), "the background task's bwrap was not born in the sandbox's cgroups")
}
