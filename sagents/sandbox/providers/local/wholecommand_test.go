//go:build linux

package local_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Limits that must hold for the whole command, not per process. Each
// attack runs where a writable cgroup exists (root), with a control
// proving the attack would succeed without the limit; where none exists
// (the unprivileged re-run), asking for the limit must be refused.

// wantCgroup says whether controller ctl must be usable: as root (unless
// SAGE_TEST_ALLOW_SKIP=1 allows skipping where there is none), or where
// this user's own cgroup of that hierarchy is writable (delegation).
func wantCgroup(t *testing.T, ctl string) bool {
	t.Helper()
	writable := cgroupWritable(ctl)
	if os.Geteuid() == 0 && !writable {
		if testenv.SkipAllowed() {
			t.Skipf("root without a writable %s cgroup", ctl)
		}
		t.Fatalf("running as root without a writable %s cgroup (set SAGE_TEST_ALLOW_SKIP=1 to skip)", ctl)
	}
	return writable
}

// cgroupWritable says whether this process may make cgroups in the
// hierarchy of ctl.
func cgroupWritable(ctl string) bool {
	dir := ownCgroupDir(ctl)
	return dir != "" && unix.Access(dir, unix.W_OK) == nil
}

// ownCgroupDir is this process's cgroup in the v1 hierarchy of ctl, or
// its v2 cgroup when the unified hierarchy is at /sys/fs/cgroup.
func ownCgroupDir(ctl string) string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	defer f.Close()
	v2 := fileExistsT("/sys/fs/cgroup/cgroup.controllers")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v2 && parts[1] == "" {
			return filepath.Join("/sys/fs/cgroup", parts[2])
		}
		for _, c := range strings.Split(parts[1], ",") {
			if !v2 && c == ctl {
				return filepath.Join("/sys/fs/cgroup", ctl, parts[2])
			}
		}
	}
	return ""
}

func fileExistsT(p string) bool { _, err := os.Stat(p); return err == nil }

func newLocalErr(t *testing.T, mutate func(*sandbox.Config)) (*sandbox.Sandbox, error) {
	t.Helper()
	requireBwrap(t)
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	mutate(&cfg)
	h, err := sandbox.New(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, nil
}

// newLimited makes a sandbox with mutate's limits where this process can
// make ctl's cgroups; elsewhere it checks that the limits are refused with
// the fix that drops them named (requireRefused) and returns nil.
func newLimited(t *testing.T, ctl string, mutate func(*sandbox.Config)) *sandbox.Sandbox {
	t.Helper()
	s, err := newLocalErr(t, mutate)
	if !wantCgroup(t, ctl) {
		requireRefused(t, err, map[string]string{"cpuacct": "cpu_time_limit: 0", "memory": "memory_limit_mb: -1"}[ctl])
		return nil
	}
	require.NoError(t, err)
	return s
}

// requireRefused checks the one-line refusal of a limit that cannot hold,
// and, as the control, that the fix it names (no such limit) is accepted
// and reported as no limit.
func requireRefused(t *testing.T, err error, fix string) {
	t.Helper()
	require.Error(t, err, "a limit that cannot hold for the whole command was accepted")
	assert.True(t, errors.Is(err, sandbox.ErrIsolationUnavailable), "%v", err)
	assert.Contains(t, err.Error(), fix)
	assert.NotContains(t, err.Error(), "\n")
	s, err := newLocalErr(t, func(c *sandbox.Config) { c.Local.CPUTimeLimit, c.Local.MemoryLimitMB = 0, -1 })
	require.NoError(t, err, "without the limits the sandbox is made")
	le := s.Driver().(*local.Sandbox).LimitsEnforced()
	assert.Equal(t, driver.EnforcedNone, le.CPUTime)
	assert.Equal(t, driver.EnforcedNone, le.Memory)
}

// cpuHog forks 4 processes that each burn 0.6 s of CPU, under the 1 s
// RLIMIT_CPU each gets, then prints "survived": 2.4 s in all. Each
// process keeps the CPU time it used so far in the file cpu.PID of the
// working directory, updated every 20 ms of CPU.
const cpuHog = `perl -e 'for (1..4) { defined(my $p = fork) or die "fork: $!"; if (!$p) { my $next = 0; while (1) { my ($u, $s) = times; my $c = $u + $s; ` +
	`if ($c >= $next || $c >= 0.6) { open(my $f, ">", "cpu.$$.new") or die; print $f $c; close $f; rename "cpu.$$.new", "cpu.$$"; $next = $c + 0.02 } last if $c >= 0.6 } exit 0 } } ` +
	`1 while wait != -1; print "survived\n"'`

// hogCPU sums what the cpuHog processes said they used.
func hogCPU(t *testing.T, s *sandbox.Sandbox, dir string) time.Duration {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.HostWorkspacePath(), dir, "cpu.*"))
	require.NoError(t, err)
	var sum time.Duration
	for _, f := range files {
		if strings.HasSuffix(f, ".new") {
			// A process killed between open and rename leaves its
			// half-written cpu.PID.new; cpu.PID holds what it had said.
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		d, err := time.ParseDuration(strings.TrimSpace(string(b)) + "s")
		require.NoError(t, err, f)
		sum += d
	}
	return sum
}

func TestLimitCPUTimeIsABudgetOfTheWholeCommand(t *testing.T) {
	s := newLimited(t, "cpuacct", func(c *sandbox.Config) { c.Local.CPUTimeLimit = time.Second })
	if s == nil {
		return
	}
	res := run(t, s, cpuHog, sandbox.ExecOptions{Timeout: 2 * time.Minute})
	used := hogCPU(t, s, "")
	t.Logf("killed after %v of CPU in all (budget 1s)", used)
	assert.NotContains(t, res.Stdout, "survived", "4 processes used 2.4 s of CPU under a 1 s budget")
	assert.True(t, res.CPUTimeExceeded, "the result says why: %+v", res)
	assert.False(t, res.TimedOut)
	assert.False(t, res.Success)
	assert.Equal(t, 152, res.ExitCode)
	assert.Equal(t, "SIGXCPU", res.Signal)
	assert.Less(t, used, 2*time.Second, "killed at about the budget")
	require.NotNil(t, res.LimitsEnforced)
	assert.Equal(t, driver.EnforcedCgroup, res.LimitsEnforced.CPUTime)

	// Control: with a budget above what the command needs, it survives
	// and used more than the 1 s above, so the test detects the attack.
	big, err := newLocalErr(t, func(c *sandbox.Config) { c.Local.CPUTimeLimit = 30 * time.Second })
	require.NoError(t, err)
	res = run(t, big, cpuHog, sandbox.ExecOptions{Timeout: 2 * time.Minute})
	used = hogCPU(t, big, "")
	t.Logf("control: %v of CPU in all (budget 30s)", used)
	assert.Equal(t, "survived\n", res.Stdout, res.Stderr)
	assert.True(t, res.Success)
	assert.False(t, res.CPUTimeExceeded)
	assert.GreaterOrEqual(t, used, 2400*time.Millisecond)
}

func TestLimitCPUTimeOfBackgroundTasks(t *testing.T) {
	s := newLimited(t, "cpuacct", func(c *sandbox.Config) { c.Local.CPUTimeLimit = time.Second })
	if s == nil {
		return
	}
	ctx := context.Background()
	task, err := s.StartBackground(ctx, cpuHog, sandbox.ExecOptions{})
	require.NoError(t, err)
	var st sandbox.BackgroundState
	require.Eventually(t, func() bool {
		st, err = s.BackgroundStatus(ctx, task.ID)
		return err == nil && !st.Alive
	}, time.Minute, 50*time.Millisecond)
	out, err := s.ReadBackgroundOutput(ctx, task.ID, 0, 0)
	require.NoError(t, err)
	assert.NotContains(t, out.Text, "survived")
	assert.True(t, st.CPUTimeExceeded, "%+v", st)
	assert.Equal(t, 152, st.ExitCode)
	assertNoCommandCgroups(t, s)

	// Control: a background task within its budget ends normally.
	task, err = s.StartBackground(ctx, "echo fine", sandbox.ExecOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err = s.BackgroundStatus(ctx, task.ID)
		return err == nil && !st.Alive
	}, time.Minute, 50*time.Millisecond)
	assert.Equal(t, sandbox.BackgroundState{}, st)
}

// sandboxCgroups lists the cgroups of sandbox s in hierarchy ctl.
func sandboxCgroups(t *testing.T, s *sandbox.Sandbox, ctl string) []string {
	t.Helper()
	dir := ownCgroupDir(ctl)
	require.NotEmpty(t, dir)
	got, err := filepath.Glob(filepath.Join(dir, "sage-"+s.ID()+"-*"))
	require.NoError(t, err)
	return got
}

func assertNoCommandCgroups(t *testing.T, s *sandbox.Sandbox) {
	t.Helper()
	assert.Eventually(t, func() bool {
		for _, d := range sandboxCgroups(t, s, "cpuacct") {
			if cmds, _ := filepath.Glob(filepath.Join(d, "cmd-*")); len(cmds) > 0 {
				t.Logf("left behind: %v", cmds)
				return false
			}
		}
		return true
	}, 5*time.Second, 20*time.Millisecond)
}

// Every command's CPU cgroup goes when the command ends: normally, killed
// by its budget, timed out, cancelled, or failing to start; and the
// sandbox's cgroups go with Close.
func TestLimitCgroupsAreNotLeft(t *testing.T) {
	ws := sandboxtest.TempDir(t)
	mount := sandboxtest.TempDir(t)
	os.Chmod(mount, 0o755)
	s := newLimited(t, "cpuacct", func(c *sandbox.Config) {
		c.Local.CPUTimeLimit = time.Second
		c.Local.FreshPerCommand = &fresh // bwrap per command: its failure path
		c.Workspace = ws
		c.Mounts = []sandbox.VolumeMount{{HostPath: mount, SandboxPath: "/mnt/m", ReadOnly: true}}
	})
	if s == nil {
		return
	}
	require.Len(t, sandboxCgroups(t, s, "cpuacct"), 1, "the sandbox's CPU cgroup")
	ctx := context.Background()

	res := run(t, s, "true", sandbox.ExecOptions{})
	assert.True(t, res.Success)
	assertNoCommandCgroups(t, s)

	res = run(t, s, "while :; do :; done", sandbox.ExecOptions{Timeout: time.Minute})
	assert.True(t, res.CPUTimeExceeded)
	assertNoCommandCgroups(t, s)

	res = run(t, s, "sleep 100", sandbox.ExecOptions{Timeout: 300 * time.Millisecond})
	assert.True(t, res.TimedOut)
	assertNoCommandCgroups(t, s)

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := s.ExecuteCommand(cctx, "sleep 100", sandbox.ExecOptions{})
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assertNoCommandCgroups(t, s)

	require.NoError(t, os.Remove(mount)) // bwrap now fails before the command starts
	res, err = s.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
	assert.True(t, err != nil || !res.Success, "bwrap cannot mount what is gone")
	assertNoCommandCgroups(t, s)

	task, err := s.StartBackground(ctx, "true", sandbox.ExecOptions{})
	if err == nil {
		require.Eventually(t, func() bool {
			st, err := s.BackgroundStatus(ctx, task.ID)
			return err == nil && !st.Alive && st.ExitCode != 0
		}, 10*time.Second, 20*time.Millisecond)
	}
	assertNoCommandCgroups(t, s)
	require.NoError(t, os.Mkdir(mount, 0o755))

	_, err = s.StartBackground(ctx, "sleep 100", sandbox.ExecOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
	assert.Eventually(t, func() bool { return len(sandboxCgroups(t, s, "cpuacct")) == 0 }, 5*time.Second, 20*time.Millisecond,
		"Close removes the sandbox's cgroups, a running background task's included")
	for _, ctl := range []string{"pids", "memory"} {
		assert.Empty(t, sandboxCgroups(t, s, ctl))
	}
}

// memoryAttacks each hold more than 64 MB in all, but no process more
// than a 64 MB RLIMIT_AS allows (perl needs twice the string while
// building it, so 20 MB each: 160 MB in all, which an unprivileged
// sandbox with --memory 64 used to hold). Each prints "held" on success.
var memoryAttacks = map[string]string{
	"8 processes of 20 MB": `perl -e 'for (1..8) { defined(my $p = fork) or die "fork: $!"; if (!$p) { my $x = "a" x (20 << 20); sleep 3; exit 0 } } my $ok = 0; while (wait != -1) { $ok++ if $? == 0 } print $ok == 8 ? "held\n" : "lost $ok\n"'`,
	"memfd of 100 MB":      `python3 -c 'import os; fd = os.memfd_create("x"); b = b"a" * (1 << 20); [os.write(fd, b) for _ in range(100)]; print("held" if os.fstat(fd).st_size == 100 << 20 else "short")'`,
	"tmpfs files of 100 MB": `head -c 52428800 /dev/zero > /dev/shm/f && head -c 52428800 /dev/zero > /tmp/f && ` +
		`test $(($(stat -c %s /dev/shm/f) + $(stat -c %s /tmp/f))) = 104857600 && echo held`,
}

func TestLimitMemoryCountsEveryProcessAndSharedMemory(t *testing.T) {
	s := newLimited(t, "memory", func(c *sandbox.Config) { c.Local.MemoryLimitMB = 64 })
	if s == nil {
		return
	}
	requirePython(t)
	assert.Equal(t, driver.EnforcedCgroup, s.Driver().(*local.Sandbox).LimitsEnforced().Memory)
	unlimited, err := newLocalErr(t, func(c *sandbox.Config) { c.Local.MemoryLimitMB = -1 })
	require.NoError(t, err)
	for name, cmd := range memoryAttacks {
		t.Run(name, func(t *testing.T) {
			res := run(t, s, cmd, sandbox.ExecOptions{Timeout: time.Minute})
			assert.NotContains(t, res.Stdout, "held", "more than 64 MB held under --memory 64: %+v", res)
			// Control: without the limit the same command holds it all.
			res = run(t, unlimited, cmd, sandbox.ExecOptions{Timeout: time.Minute})
			assert.Equal(t, "held\n", res.Stdout, res.Stderr)
		})
	}
}

// A session whose /tmp and /dev/shm are full stays a working machine:
// files in memory, which killing their writer does not free, leave room
// for the session's own processes, so the OOM killer never has to take
// its supervisor (that ended the session, /tmp and all). Three rounds:
// filled again, then used. The session runs cmd/sage-supervisor, as
// bin/sage does: this test program re-executed as the supervisor is 22 MB
// under -race (7 MB without), more than the 16 MB the full tmpfs spare,
// and any thread more it makes tips the session into its OOM killer.
func TestLimitMemorySessionSurvivesFullTmpfs(t *testing.T) {
	mutate := func(c *sandbox.Config) { c.Local.MemoryLimitMB = 64 }
	if newLimited(t, "memory", mutate) == nil {
		return
	}
	sup, err := testenv.SupervisorBinary()
	require.NoError(t, err)
	s := newSession(t, local.SessionOptions{Supervisor: sup}, mutate)
	fill := `cat /dev/zero > /tmp/fill; cat /dev/zero > /dev/shm/fill; du -m /tmp/fill /dev/shm/fill`
	for i := range 3 {
		res, err := s.Exec(t.Context(), driver.ExecSpec{Command: fill, ExecOptions: sandbox.ExecOptions{Timeout: time.Minute}})
		require.NoError(t, err, "round %d: the session ended while /tmp filled", i)
		assert.Contains(t, res.Stderr, "No space left on device", "round %d: the tmpfs bounds stop the writes: %+v", i, res)
		assert.Equal(t, "32\t/tmp/fill\n16\t/dev/shm/fill\n", res.Stdout, "round %d: /tmp is half of 64 MB, /dev/shm a quarter", i)
		res, err = s.Exec(t.Context(), driver.ExecSpec{Command: "echo up; ls /tmp /dev/shm", ExecOptions: sandbox.ExecOptions{Timeout: time.Minute}})
		require.NoError(t, err, "round %d: the session ended", i)
		assert.True(t, res.Success, "round %d: %+v", i, res)
		assert.False(t, res.SessionRestarted, "round %d: the full tmpfs cost the session its supervisor", i)
		assert.Equal(t, "up\n/dev/shm:\nfill\n\n/tmp:\nfill\n", res.Stdout, "round %d: the files stay", i)
	}
}

// The report never claims more than holds: where no writable cgroup
// exists the default memory limit is per process, and the limits that
// would not hold for the whole command are refused.
func TestLimitsEnforcedReport(t *testing.T) {
	s := newLocal(t, nil)
	res := run(t, s, "true", sandbox.ExecOptions{})
	require.NotNil(t, res.LimitsEnforced, "every local result says which limits hold")
	assert.Equal(t, s.Driver().(*local.Sandbox).LimitsEnforced(), *res.LimitsEnforced)
	want := driver.LimitsEnforced{CPUTime: driver.EnforcedNone, Memory: driver.EnforcedPerProcess,
		Pids: driver.EnforcedUserNS, FileSize: driver.EnforcedPerProcess}
	if wantCgroup(t, "memory") {
		want.Memory = driver.EnforcedCgroup
	}
	if wantCgroup(t, "pids") {
		want.Pids = driver.EnforcedCgroup
	}
	assert.Equal(t, want, *res.LimitsEnforced)
	assert.Equal(t, want.Memory, local.ProbeLimits().Memory)

	none := newLocal(t, func(c *sandbox.Config) {
		c.Local.MemoryLimitMB, c.Local.PidsLimit, c.Local.FileSizeLimitMB = -1, -1, -1
	})
	assert.Equal(t, driver.LimitsEnforced{CPUTime: driver.EnforcedNone, Memory: driver.EnforcedNone,
		Pids: driver.EnforcedNone, FileSize: driver.EnforcedNone}, none.Driver().(*local.Sandbox).LimitsEnforced())
}

// Isolation none joins the command's CPU cgroup through the trampoline.
func TestLimitCPUTimeWithIsolationNone(t *testing.T) {
	s := newLimited(t, "cpuacct", func(c *sandbox.Config) {
		c.Local.CPUTimeLimit = time.Second
		c.Local.Isolation.Linux = sandbox.IsolationNone
	})
	if s == nil {
		return
	}
	res := run(t, s, cpuHog, sandbox.ExecOptions{Timeout: 2 * time.Minute})
	assert.NotContains(t, res.Stdout, "survived")
	assert.True(t, res.CPUTimeExceeded, "%+v", res)
	assert.Less(t, hogCPU(t, s, ""), 2*time.Second)
	assertNoCommandCgroups(t, s)
	res = run(t, s, "echo fine", sandbox.ExecOptions{}) // control
	assert.Equal(t, "fine\n", res.Stdout, res.Stderr)
	assert.False(t, res.CPUTimeExceeded)
}
