//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

// TestSessionEscapeSuite runs the escape suite against commands forked by
// a session sandbox's supervisor. "kill every process it can see" may
// kill the supervisor (under gVisor: under bwrap it is pid 1 and outside
// the command's Landlock domain), and then the cases after it run in a
// restarted session.
func TestSessionEscapeSuite(t *testing.T) {
	t.Setenv("SAGE_ESCAPE_SECRET", "hunter2")
	w := newEscapeWorld(t)
	s := newSession(t, local.SessionOptions{}, escapeConfig(w))
	runSessionEscapeCases(t, s, w)
	w.assertIntact(t)
}

// runSessionEscapeCases runs every attack of the escape suite in the
// session sandbox of s, each as a subtest; an attack that may end the
// session and did is followed by a command that must find a new one.
func runSessionEscapeCases(t *testing.T, s *local.Sandbox, w escapeWorld) {
	t.Helper()
	for _, tc := range escapeCases(w, os.Getpid()) {
		t.Run(tc.name, func(t *testing.T) {
			if ctl := escapeNeeds[tc.name]; ctl != "" && !cgroupWritable(ctl) {
				t.Skipf("needs a %s cgroup: without one the limit is refused", ctl)
			}
			res, err := s.Exec(context.Background(), driver.ExecSpec{Command: tc.cmd})
			if sessionMayDie[tc.name] && err != nil {
				// The session died with its supervisor (killed, or OOM
				// with a /tmp that fills the session's memory): no escape,
				// and the next command gets a new session.
				res, err := s.Exec(context.Background(), driver.ExecSpec{Command: "echo up"})
				require.NoError(t, err)
				assert.True(t, res.SessionRestarted)
				return
			}
			require.NoError(t, err)
			assert.NotContains(t, res.Stdout, "ESCAPED", "stderr: %s", res.Stderr)
			assert.False(t, res.TimedOut)
		})
	}
}

// sessionMayDie names the attacks that may end the session sandbox.
var sessionMayDie = map[string]bool{"kill every process it can see": true, "fill the private /tmp": true}

// TestSessionCPUBudgetIsPerCommand: each command of a session has its own
// CPU budget, killing that command only.
func TestSessionCPUBudgetIsPerCommand(t *testing.T) {
	if !cgroupWritable("cpuacct") {
		t.Skip("needs a writable cpu cgroup (the CPU limit is refused without one)")
	}
	s := newSession(t, local.SessionOptions{}, func(c *sandbox.Config) { c.Local.CPUTimeLimit = time.Second })
	sh(t, s, "echo kept > /tmp/f", sandbox.ExecOptions{})
	start := time.Now()
	res := sh(t, s, "sh -c 'while :; do :; done' & sh -c 'while :; do :; done'", sandbox.ExecOptions{Timeout: 20 * time.Second})
	assert.True(t, res.CPUTimeExceeded, "%+v", res)
	assert.Less(t, time.Since(start), 10*time.Second)
	// A second command gets a fresh budget; the session lives on.
	res = sh(t, s, "cat /tmp/f; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done", sandbox.ExecOptions{})
	assert.Equal(t, "kept\ndone\n", res.Stdout, res.Stderr)
}

// supervisorPID finds the supervisor from inside: its command line is
// readable even though the process is not dumpable.
const supervisorPID = `for p in /proc/[0-9]*; do case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in "/run/sage/bin/sage-supervisor --fd "*) sup=${p#/proc/};; esac; done`

// TestSessionControlChannelIsOutOfReach: a command cannot open or steal
// the supervisor's control socket, trace it, or raise limits through it.
// The control half of each check runs the same probe against a process
// the command owns, proving that the probe works.
func TestSessionControlChannelIsOutOfReach(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	probe := `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
got = []
try:
    pfd = os.pidfd_open(pid)
except OSError as e:
    print("pidfd_open", e.errno); sys.exit()
for fd in range(0, 32):
    r = libc.syscall(438, pfd, fd, 0)  # pidfd_getfd
    if r >= 0:
        got.append(os.readlink("/proc/self/fd/%d" % r))
print("GOT" if any("socket" in g for g in got) else "none", len(got))
`
	res := sh(t, s, supervisorPID+`; test -n "$sup" && echo found
cat > /tmp/probe.py <<'PY'
`+probe+`PY
python3 /tmp/probe.py $sup
for f in /proc/$sup/fd/*; do readlink $f; done 2>/dev/null | grep -q . && echo LISTED
cat /proc/$sup/environ 2>/dev/null | grep -qa PATH && echo ENVIRON
prlimit --pid $sup --nofile=1048576:1048576 2>/dev/null && echo RAISED
ls /proc/self/fd | tr '\n' ' '; echo
sleep 30 & kid=$!
python3 /tmp/probe.py $kid
for f in /proc/$kid/fd/*; do readlink $f; done 2>/dev/null | grep -q . && echo control-listed
kill $kid`, sandbox.ExecOptions{})
	lines := strings.Split(res.Stdout, "\n")
	require.GreaterOrEqual(t, len(lines), 5, "stdout %q stderr %q", res.Stdout, res.Stderr)
	assert.Equal(t, "found", lines[0])
	assert.NotContains(t, lines[1], "GOT", "stole the control socket")
	assert.Equal(t, "none 0", lines[1], "took a descriptor of the supervisor")
	assert.NotContains(t, res.Stdout, "LISTED")
	assert.NotContains(t, res.Stdout, "ENVIRON")
	assert.NotContains(t, res.Stdout, "RAISED")
	assert.Equal(t, "0 1 2 3 ", lines[2], "the command holds only stdio (3: ls's own directory)")
	// Control: the same probe takes descriptors of a process it owns.
	assert.Contains(t, lines[3], "none 3", "the probe could not take a sibling's descriptors: it proves nothing")
	assert.Equal(t, "control-listed", lines[4])
}

// TestSessionForkBombLeavesOtherSessionUsable runs a fork bomb in one
// session while another session and the host keep working.
func TestSessionForkBombLeavesOtherSessionUsable(t *testing.T) {
	a := newSession(t, local.SessionOptions{}, func(c *sandbox.Config) { c.Local.PidsLimit = 64 })
	b := newSession(t, local.SessionOptions{}, func(c *sandbox.Config) { c.Local.PidsLimit = 64 })
	sh(t, b, "echo ready", sandbox.ExecOptions{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Exec(context.Background(), driver.ExecSpec{Command: `f() { f | f & }; f 2>/dev/null; sleep 4`, ExecOptions: sandbox.ExecOptions{Timeout: 6 * time.Second}})
	}()
	time.Sleep(time.Second)
	start := time.Now()
	res := sh(t, b, "echo alive", sandbox.ExecOptions{Timeout: 10 * time.Second})
	assert.Equal(t, "alive\n", res.Stdout, res.Stderr)
	assert.Less(t, time.Since(start), 3*time.Second, "the other session during the bomb")
	start = time.Now()
	require.NoError(t, exec.Command("/bin/true").Run())
	assert.Less(t, time.Since(start), 3*time.Second, "host fork/exec during the bomb")
	<-done
	a.Close(context.Background())
	out, _ := exec.Command("sh", "-c", "ps -eo comm | grep -c '^sh$' || true").Output()
	assert.Less(t, atoi(strings.TrimSpace(string(out))), 60, "bomb processes survived the session")
	_ = fmt.Sprint
}
