//go:build linux

package local_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// sessionIsolation, when set, is the isolation of every session sandbox
// newSession makes (TestGvisorSession sets it to gvisor).
var sessionIsolation string

// useGvisorSessions makes newSession's sandboxes gVisor ones for the rest
// of t.
func useGvisorSessions(t *testing.T) {
	requireGvisor(t)
	sessionIsolation = sandbox.IsolationGvisor
	t.Cleanup(func() { sessionIsolation = "" })
}

// sessionCheckpoints, with sessionIsolation gvisor, turns checkpoints on
// in every session sandbox newSession makes (TestGvisorSessionCheckpointsOn).
var sessionCheckpoints bool

// TestGvisorSessionCheckpointsOn reruns the session tests with a gVisor
// session sandbox whose control socket is runsc's stdin (checkpoints on),
// not a descriptor donated with --pass-fd: the session behaves the same.
func TestGvisorSessionCheckpointsOn(t *testing.T) {
	useGvisorSessions(t)
	sessionCheckpoints = true
	t.Cleanup(func() { sessionCheckpoints = false })
	runSessionTests(t, sessionTests)
}

// TestGvisorSession reruns the session tests with a gVisor session
// sandbox: one runsc sandbox per session whose init is the supervisor.
func TestGvisorSession(t *testing.T) {
	useGvisorSessions(t)
	runSessionTests(t, sessionTests)
}

// sessionTests are the session tests that TestGvisorSession and
// TestSessionOwnSupervisor rerun under another isolation or supervisor.
var sessionTests = []sessionTest{
	{"KeepsTmpProcessesAndLocalhost", TestSessionKeepsTmpProcessesAndLocalhost},
	{"TimeoutKillsOnlyThatCommand", TestSessionTimeoutKillsOnlyThatCommand},
	{"ExitStatusStdinEnvWorkdir", TestSessionExitStatusStdinEnvWorkdir},
	{"SessionsCannotSeeEachOther", TestSessionsCannotSeeEachOther},
	{"CloseKillsAllAndRestartsAfterIdle", TestSessionCloseKillsAllAndRestartsAfterIdle},
	{"SupervisorKilledIsReplaced", TestSessionSupervisorKilledIsReplaced},
	{"BackgroundTaskRunsInTheSession", TestSessionBackgroundTaskRunsInTheSession},
	{"BackgroundTaskKeepsSessionAwakeAndDiesOnClose", TestSessionBackgroundTaskKeepsSessionAwakeAndDiesOnClose},
	{"PythonAndJavaScriptShareTheSession", TestSessionPythonAndJavaScriptShareTheSession},
	{"CPUBudgetIsPerCommand", TestSessionCPUBudgetIsPerCommand},
	{"ForkBombLeavesOtherSessionUsable", TestSessionForkBombLeavesOtherSessionUsable},
	{"ReapsOrphans", TestSessionReapsOrphans},
	{"TimeoutKillsTheWholeCommand", TestSessionTimeoutKillsTheWholeCommand},
}

type sessionTest struct {
	name string
	test func(*testing.T)
}

func runSessionTests(t *testing.T, tests []sessionTest) {
	for _, tc := range tests {
		t.Run(tc.name, tc.test)
	}
}

// TestGvisorSessionContract runs the contract suite through a gVisor
// session sandbox: isolation gvisor with fresh_per_command unset.
func TestGvisorSessionContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Options{
		New: func(t *testing.T) *sandbox.Sandbox {
			s := newGvisor(t, nil)
			require.True(t, s.Driver().(*local.Sandbox).SessionEnabled(), "the session sandbox is gvisor's default")
			return s
		},
		SignalsAsExitCodes: true,
	})
}

// TestGvisorSessionRunsOnItsOwnKernel: the commands of a gVisor session
// talk to gVisor's kernel (its /proc/version and boot messages), and they
// share the session (a file in /tmp is kept); a bwrap session's command
// reads the host's /proc/version (the control).
func TestGvisorSessionRunsOnItsOwnKernel(t *testing.T) {
	host, err := os.ReadFile("/proc/version")
	require.NoError(t, err)
	s := newGvisor(t, nil).Driver().(*local.Sandbox)
	require.True(t, s.SessionEnabled())
	res := sh(t, s, "cat /proc/version > /tmp/v; dmesg 2>/dev/null | head -n 1", sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	assert.Contains(t, strings.ToLower(res.Stdout), "gvisor")
	res = sh(t, s, "cat /tmp/v", sandbox.ExecOptions{})
	require.True(t, res.Success, "the second command sees the first one's /tmp: %s", res.Stderr)
	assert.NotEqual(t, strings.TrimSpace(string(host)), strings.TrimSpace(res.Stdout))
	assert.NotZero(t, s.SessionPID())

	b := newSession(t, local.SessionOptions{}, nil)
	res = sh(t, b, "cat /proc/version", sandbox.ExecOptions{})
	assert.Equal(t, strings.TrimSpace(string(host)), strings.TrimSpace(res.Stdout))
}

// TestGvisorSessionEscapeSuite runs the escape suite against commands of
// a gVisor session sandbox twice: in the first session, then again after
// the session was killed from the host and restarted.
func TestGvisorSessionEscapeSuite(t *testing.T) {
	useGvisorSessions(t)
	t.Setenv("SAGE_ESCAPE_SECRET", "hunter2")
	w := newEscapeWorld(t)
	s := newSession(t, local.SessionOptions{}, escapeConfig(w))
	for round, name := range []string{"first session", "restarted session"} {
		if round > 0 {
			killSession(t, s)
			res := sh(t, s, "echo up", sandbox.ExecOptions{})
			require.True(t, res.SessionRestarted, "the crashed session is replaced")
		}
		t.Run(name, func(t *testing.T) { runSessionEscapeCases(t, s, w) })
	}
	w.assertIntact(t)
}

// TestGvisorSessionSupervisorIsOutOfReach: inside gVisor the supervisor
// is the sandbox's init, of the commands' uid but not dumpable; a command
// cannot trace it, list or take its descriptors (the control socket) or
// read its environment, while the same probes work against a process the
// command owns (the control). A supervisor killed from the host (a crash)
// is replaced by the next command.
func TestGvisorSessionSupervisorIsOutOfReach(t *testing.T) {
	useGvisorSessions(t)
	requirePython(t)
	s := newSession(t, local.SessionOptions{}, nil)
	probe := `import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def probe(pid):
    out = "attached" if libc.ptrace(16, pid, 0, 0) == 0 else "attach-refused"  # PTRACE_ATTACH
    try:
        pfd = os.pidfd_open(pid)
        out += " took %d" % sum(1 for fd in range(32) if libc.syscall(438, pfd, fd, 0) >= 0)  # pidfd_getfd
    except OSError as e:
        out += " no-pidfd"
    return out
if sys.argv[1] == "child":  # the control: a process of its own
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    print(probe(pid))
    os.kill(pid, 9)
else:
    print(probe(int(sys.argv[1])))
`
	res := sh(t, s, supervisorPID+`; test -n "$sup" && echo "found $sup"
cat > /tmp/probe.py <<'PY'
`+probe+`PY
python3 /tmp/probe.py $sup
for f in /proc/$sup/fd/*; do readlink $f; done 2>/dev/null | grep -q . && echo LISTED
sh -c 'exec 5<>/proc/$1/fd/3' sh $sup 2>/dev/null && echo OPENED
cat /proc/$sup/environ 2>/dev/null | grep -qa PATH && echo ENVIRON
echo kept > /tmp/kept
ls /proc/self/fd | tr '\n' ' '; echo
python3 /tmp/probe.py child
sleep 30 & kid=$!
for f in /proc/$kid/fd/*; do readlink $f; done 2>/dev/null | grep -q . && echo control-listed
kill $kid`, sandbox.ExecOptions{})
	lines := strings.Split(res.Stdout, "\n")
	require.GreaterOrEqual(t, len(lines), 5, "stdout %q stderr %q", res.Stdout, res.Stderr)
	assert.True(t, strings.HasPrefix(lines[0], "found "), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "attach-refused"), "traced the supervisor: %s", lines[1])
	assert.NotRegexp(t, `took [1-9]`, lines[1], "took a descriptor of the supervisor")
	assert.NotContains(t, res.Stdout, "LISTED", "read the supervisor's descriptors")
	assert.NotContains(t, res.Stdout, "OPENED", "opened the control socket")
	assert.NotContains(t, res.Stdout, "ENVIRON")
	assert.Equal(t, "0 1 2 3 ", lines[2], "the command holds only stdio (3: ls's own directory)")
	// Control: the same probes work against a process the command owns.
	assert.True(t, strings.HasPrefix(lines[3], "attached"), "the probe could not trace its own child: it proves nothing (%s)", lines[3])
	assert.Equal(t, "control-listed", lines[4])
	res = sh(t, s, "cat /tmp/kept", sandbox.ExecOptions{})
	assert.Equal(t, "kept\n", res.Stdout)
	assert.False(t, res.SessionRestarted)

	// Killed from the host (a crash): the next command gets a new session.
	killSession(t, s)
	res = sh(t, s, "cat /tmp/kept 2>/dev/null; echo new", sandbox.ExecOptions{})
	assert.Equal(t, "new\n", res.Stdout, res.Stderr)
	assert.True(t, res.SessionRestarted)
}

// TestGvisorSessionCloseLeavesNothing: Close ends runsc and its sandbox
// and removes the sandbox's state, cgroups and runtime files.
func TestGvisorSessionCloseLeavesNothing(t *testing.T) {
	useGvisorSessions(t)
	rt := sandboxtest.TempDir(t)
	s := newSession(t, local.SessionOptions{}, func(c *sandbox.Config) { c.RuntimeDir = rt })
	res := sh(t, s, "sleep 300 & echo started", sandbox.ExecOptions{})
	require.Equal(t, "started\n", res.Stdout, res.Stderr)
	pid := s.SessionPID()
	require.NotZero(t, pid)
	require.NoError(t, s.Close(context.Background()))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "runsc's process group is gone")
	_, err := os.Stat(filepath.Join(rt, "gvisor"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "runsc's state and bundles are removed")
}

// killSession kills the session sandbox from the host (a crash) and
// waits until the sandbox noticed.
func killSession(t *testing.T, s *local.Sandbox) {
	t.Helper()
	pid := s.SessionPID()
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	deadline := time.Now().Add(10 * time.Second)
	for s.SessionPID() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Zero(t, s.SessionPID(), "the dead session is noticed")
}

// TestSessionBridgeIsOutOfReach: with network allowlist the egress bridge
// runs in the session sandbox above the supervisor and holds a copy of
// the control socket (the supervisor inherits it through the bridge): a
// command must not trace the bridge or read its descriptors, or it could
// take the session's requests (other commands' stdio) off the channel.
// The control: the same probes work against a process the command owns.
func TestSessionBridgeIsOutOfReach(t *testing.T) {
	requirePython(t)
	for _, iso := range []string{"bwrap", sandbox.IsolationGvisor} {
		t.Run(iso, func(t *testing.T) {
			if iso == sandbox.IsolationGvisor {
				useGvisorSessions(t)
			}
			s := newSession(t, local.SessionOptions{}, func(c *sandbox.Config) {
				c.Local.Network = sandbox.NetworkAllowlist
				c.Local.AllowedDomains = []string{"127.0.0.1:9"}
			})
			res := sh(t, s, `for p in /proc/[0-9]*; do case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in "/run/sage/bin/sage-netbridge "*) b=${p#/proc/};; esac; done
test -n "$b" && echo found
cat > /tmp/attach.py <<'PY'
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
if pid == 0:  # the control: a child of its own
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
print("ATTACHED" if libc.ptrace(16, pid, 0, 0) == 0 else "refused")
PY
python3 /tmp/attach.py $b
for f in /proc/$b/fd/*; do readlink $f; done 2>/dev/null | grep -q . && echo LISTED || echo unlisted
python3 /tmp/attach.py 0
sleep 30 & kid=$!
for f in /proc/$kid/fd/*; do readlink $f; done 2>/dev/null | grep -q . && echo control-listed
kill $kid`, sandbox.ExecOptions{})
			assert.Equal(t, "found\nrefused\nunlisted\nATTACHED\ncontrol-listed\n", res.Stdout, res.Stderr)
		})
	}
}

// TestGvisorSessionCPUTime: a command and a background task of a gVisor
// session get their own CPU budget (RLIMIT_CPU inside gVisor: per
// process, and the result says so), and the result or status says when
// the budget killed them; a task within its budget ends normally (the
// control).
func TestGvisorSessionCPUTime(t *testing.T) {
	s := newGvisor(t, func(c *sandbox.Config) { c.Local.CPUTimeLimit = time.Second })
	require.True(t, s.Driver().(*local.Sandbox).SessionEnabled())
	ctx := context.Background()
	res, err := s.ExecuteCommand(ctx, "while :; do :; done", sandbox.ExecOptions{Timeout: 30 * time.Second})
	require.NoError(t, err)
	assert.True(t, res.CPUTimeExceeded, "%+v", res)
	assert.Equal(t, 152, res.ExitCode)
	require.NotNil(t, res.LimitsEnforced)
	assert.Equal(t, driver.EnforcedPerProcess, res.LimitsEnforced.CPUTime)
	res, err = s.ExecuteCommand(ctx, "exit 0", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.False(t, res.CPUTimeExceeded)

	wait := func(id string) sandbox.BackgroundState {
		var st sandbox.BackgroundState
		require.Eventually(t, func() bool {
			var err error
			st, err = s.BackgroundStatus(ctx, id)
			return err == nil && !st.Alive
		}, time.Minute, 50*time.Millisecond)
		return st
	}
	task, err := s.StartBackground(ctx, "while :; do :; done; echo survived", sandbox.ExecOptions{})
	require.NoError(t, err)
	st := wait(task.ID)
	out, err := s.ReadBackgroundOutput(ctx, task.ID, 0, 0)
	require.NoError(t, err)
	assert.NotContains(t, out.Text, "survived")
	assert.True(t, st.CPUTimeExceeded, "%+v", st)
	assert.Equal(t, 152, st.ExitCode)

	task, err = s.StartBackground(ctx, "echo fine", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, sandbox.BackgroundState{}, wait(task.ID))
}

// TestGvisorSessionLeftoversDieWithCPULimit: with a CPU limit, a bwrap
// session's command takes its leftover processes with it (its CPU cgroup
// is killed); a gVisor session has no per-command host cgroup, so the
// command's process group dies with its leader instead (a fork bomb's
// survivors no longer starve the session's next commands). Control:
// without a CPU limit a command's leftover process is kept.
func TestGvisorSessionLeftoversDieWithCPULimit(t *testing.T) {
	useGvisorSessions(t)
	for _, limit := range []time.Duration{5 * time.Second, 0} {
		s := newSession(t, local.SessionOptions{}, func(c *sandbox.Config) { c.Local.CPUTimeLimit = limit })
		res := sh(t, s, "sleep 303 & sleep 0.2; exit 0", sandbox.ExecOptions{})
		require.True(t, res.Success, res.Stderr)
		want := "0"
		if limit == 0 {
			want = "1"
		}
		got := ""
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			res = sh(t, s, "ps -eo args | grep -c '^sleep 303$' || true", sandbox.ExecOptions{})
			if got = strings.TrimSpace(res.Stdout); got == want {
				break
			}
		}
		assert.Equal(t, want, got, "leftover processes with CPU limit %v", limit)
	}
}
