//go:build linux

package local

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
)

// A session behaves like one machine for signals (issue 31's
// follow-up): a later command may signal a background task's processes,
// a process an earlier command left, and its own children, with kill,
// kill -0, sigqueue, pidfd_send_signal, pkill -f, kill of a process
// group and kill -1; while the supervisor (pid 1), its threads, and
// ptrace across commands stay out of reach. They run in the bwrap
// session as root and, through TestUnprivileged, as an ordinary user,
// and in the gVisor session as root (there, without Landlock, commands
// always could signal each other).

// bgTask starts a background task running script and waits until it
// printed "ready".
func bgTask(t *testing.T, s *Sandbox, script string) *sandbox.BackgroundTask {
	t.Helper()
	task, err := s.StartBackground(context.Background(), script, sandbox.ExecOptions{})
	require.NoError(t, err)
	waitBackground(s, task.ID, "ready", 20*time.Second)
	out, _ := s.ReadBackgroundOutput(context.Background(), task.ID, 0, 1<<16)
	require.Contains(t, out.Text, "ready", "the background task did not start: %q", out.Text)
	return task
}

// taskAlive reports whether the background task still runs, waiting up
// to limit for it to end.
func taskAlive(t *testing.T, s *Sandbox, id string, limit time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		st, err := s.BackgroundStatus(context.Background(), id)
		require.NoError(t, err)
		if !st.Alive || time.Now().After(deadline) {
			return st.Alive
		}
	}
}

// waitFile waits up to limit for a command to find want in file (inside).
func waitFile(t *testing.T, s *Sandbox, file, want string, limit time.Duration) bool {
	t.Helper()
	res := rtRun(t, s, `for i in $(seq `+strconv.Itoa(int(limit/(50*time.Millisecond)))+`); do grep -q "`+want+`" `+file+` 2>/dev/null && exit 0; sleep 0.05; done; exit 1`, sandbox.ExecOptions{})
	return res.ExitCode == 0
}

// trapTask is a background task that records each SIGUSR1 and SIGUSR2
// it gets in /tmp/NAME.log and its pid in /tmp/NAME.pid.
func trapTask(name string) string {
	return `trap 'echo usr1 >> /tmp/` + name + `.log' USR1; trap 'echo usr2 >> /tmp/` + name + `.log' USR2; echo $$ > /tmp/` + name + `.pid; echo ready; while :; do sleep 0.05; done`
}

// pySignal sends argv[2] (a signal number) to the process whose pid is
// in file argv[1], through the system call argv[3] names (pidfd:
// pidfd_open + pidfd_send_signal), and prints "OK" or the error.
const pySignal = `import os, signal, sys
pid = int(open(sys.argv[1]).read())
try:
    if sys.argv[3] == "pidfd":
        fd = os.pidfd_open(pid)
        signal.pidfd_send_signal(fd, int(sys.argv[2]))
    else:
        os.kill(pid, int(sys.argv[2]))
    print("OK")
except OSError as e:
    print("ERR", e.errno)
`

// signalsAcross runs each way a command signals a process outside its
// own command in s and reports, by name, whether it worked.
func signalsAcross(t *testing.T, s *Sandbox) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	run := func(cmd string) *sandbox.CommandResult { return rtRun(t, s, cmd, sandbox.ExecOptions{}) }

	// A background task's process: kill -0, kill (a trapped SIGUSR1),
	// sigqueue (procps kill -q: rt_sigqueueinfo) and pidfd_send_signal.
	task := bgTask(t, s, trapTask("a"))
	res := run(`kill -0 "$(cat /tmp/a.pid)"`)
	got["kill -0 task"] = res.ExitCode == 0
	t.Logf("kill -0: %d %s", res.ExitCode, res.Stderr)
	run(`kill -USR1 "$(cat /tmp/a.pid)"`)
	got["kill task"] = waitFile(t, s, "/tmp/a.log", "usr1", 3*time.Second)
	run(`/bin/kill -q 7 -s USR2 "$(cat /tmp/a.pid)"`)
	got["sigqueue task"] = waitFile(t, s, "/tmp/a.log", "usr2", 3*time.Second)
	res = attackRun(t, s, "python3 - /tmp/a.pid 15 pidfd", pySignal, sandbox.ExecOptions{})
	got["pidfd_send_signal task"] = strings.Contains(res.Stdout, "OK") && !taskAlive(t, s, task.ID, 5*time.Second)
	t.Logf("pidfd_send_signal: %s %s", res.Stdout, res.Stderr)

	// pkill -f of a background task.
	task = bgTask(t, s, "echo ready; exec sleep 4242")
	res = run(`pkill -f '^sleep 4242$'`)
	got["pkill -f task"] = res.ExitCode == 0 && !taskAlive(t, s, task.ID, 5*time.Second)

	// A process group: the task's shell and its two children.
	task = bgTask(t, s, `sleep 4343 & sleep 4344 & echo $$ > /tmp/g.pid; echo ready; wait`)
	res = run(`/bin/kill -TERM -- "-$(cat /tmp/g.pid)"`)
	got["kill process group"] = res.ExitCode == 0 && !taskAlive(t, s, task.ID, 5*time.Second) &&
		waitSleeps(t, s, 4343) == 0 && waitSleeps(t, s, 4344) == 0

	// A process an earlier command left behind (it ended on its own).
	run(`setsid sleep 4545 > /dev/null 2>&1 & exit 0`)
	require.Equal(t, 1, sleepCount(t, s, 4545), "the earlier command's leftover runs")
	res = run(`pkill -f '^sleep 4545$'`)
	got["pkill -f leftover"] = res.ExitCode == 0 && waitSleeps(t, s, 4545) == 0

	// kill -1: everything but the caller (and the supervisor).
	task = bgTask(t, s, "echo ready; exec sleep 4646")
	res = run(`kill -TERM -1; echo spared`)
	got["kill -1"] = !taskAlive(t, s, task.ID, 5*time.Second)
	assert.Equal(t, "spared\n", res.Stdout, "kill -1 spares its caller: %s", res.Stderr)
	next := run("echo next")
	assert.Equal(t, "next\n", next.Stdout, "the session serves after kill -1: %s", next.Stderr)
	assert.False(t, next.SessionRestarted, "kill -1 ended the session sandbox")
	return got
}

// signalWays are the ways signalsAcross tries.
var signalWays = []string{"kill -0 task", "kill task", "sigqueue task", "pidfd_send_signal task", "pkill -f task",
	"kill process group", "pkill -f leftover", "kill -1"}

// TestSessionSignalsAcrossCommands: every way of signalling a process of
// a background task or of an earlier command works from a later command
// (issue 31's follow-up: they failed with EPERM once each command had its
// Landlock domain), and so does a command's signal to its own children.
//
// Control: with the relay off (the code of #31), each fails where there
// are Landlock domains, and the command's own child is still signalled.
func TestSessionSignalsAcrossCommands(t *testing.T) {
	attackIsolations(t, func(t *testing.T, iso string) {
		got := signalsAcross(t, attackSession(t, iso, nil))
		for _, w := range signalWays {
			assert.True(t, got[w], "%s failed", w)
		}
		own := rtRun(t, attackSession(t, iso, nil), `sleep 4747 & kill $!; wait $!; echo $?`, sandbox.ExecOptions{})
		assert.Equal(t, "143\n", own.Stdout, "a command signals its own child: %s", own.Stderr)
	})
	t.Run("control", func(t *testing.T) {
		requireSignalScopes(t)
		commandSignals = "off"
		t.Cleanup(func() { commandSignals = "on" })
		was := leftoverWait
		leftoverWait = 2 * time.Second
		t.Cleanup(func() { leftoverWait = was })
		s := attackSession(t, "", nil)
		got := signalsAcross(t, s)
		for _, w := range signalWays {
			assert.False(t, got[w], "%s worked without the relay: the test does not see it", w)
		}
		own := rtRun(t, s, `sleep 4747 & kill $!; wait $!; echo $?`, sandbox.ExecOptions{})
		assert.Equal(t, "143\n", own.Stdout, "a command signals its own child: %s", own.Stderr)
	})
}
