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

	"github.com/sage-go/sage/internal/testenv"
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
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && sleepCount(t, s, 4545) == 0; time.Sleep(50 * time.Millisecond) {
	}
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

// pySignalSupervisor tries every way a command has to signal the
// supervisor, pid 1 (the supervisor or the network bridge) or one of
// their threads: kill, sigqueue (rt_sigqueueinfo), pidfd_send_signal,
// tgkill and kill of their process group, with signal 0, SIGCONT and
// SIGSTOP, and SIGTERM unless argv[1] is "safe". It prints "HIT how" for
// each call that succeeded, then "done". The background task's pid is
// in /tmp/victim.pid: the probe's control, which it must reach.
const pySignalSupervisor = `import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
sigs = [0, signal.SIGCONT, signal.SIGSTOP] + ([] if sys.argv[1] == "safe" else [signal.SIGTERM])
def cmdline(p):
    try:
        return open("/proc/%d/cmdline" % p, "rb").read()
    except OSError:
        return b""
targets = {1} | {int(d) for d in os.listdir("/proc") if d.isdigit() and b"sage-supervisor" in cmdline(int(d))}
def hit(how, ok):
    if ok:
        print("HIT", how, flush=True)
for p in sorted(targets):
    tids = [int(t) for t in os.listdir("/proc/%d/task" % p)]
    for sig in sigs:
        for tid in tids:
            try:
                os.kill(tid, sig); hit("kill %d/%d %d" % (p, tid, sig), True)
            except OSError:
                pass
            hit("tgkill %d/%d %d" % (p, tid, sig), libc.syscall(234, p, tid, sig) == 0)
        hit("sigqueue %d %d" % (p, sig), libc.sigqueue(p, sig, ctypes.c_void_p(0)) == 0)
        try:
            fd = os.pidfd_open(p)
            signal.pidfd_send_signal(fd, sig); hit("pidfd %d %d" % (p, sig), True)
        except OSError:
            pass
        pg = os.getpgid(p)
        if pg > 1 and pg != os.getpgid(0):  # killpg(1) is kill(-1): every process
            try:
                os.killpg(pg, sig); hit("killpg %d %d" % (pg, sig), True)
            except OSError:
                pass
# Join pid 1's process group where it may, and signal that group (the
# probe is in it too: it catches the signal).
signal.signal(signal.SIGTERM, lambda *_: None)
try:
    os.setpgid(0, os.getpgid(1))
    os.kill(0, signal.SIGCONT if sys.argv[1] == "safe" else signal.SIGTERM)
except OSError:
    pass
victim = int(open("/tmp/victim.pid").read())
try:
    os.kill(victim, 0); print("REACHED", victim, flush=True)
except OSError as e:
    print("MISSED", victim, e, flush=True)
print("done", flush=True)
`

// attackSignalSupervisor runs pySignalSupervisor in s, a background task
// running, and returns the calls that reached a protected process,
// whether the probe reached the task, and whether the session sandbox
// then still served the same way (not restarted, pid 1 not stopped).
func attackSignalSupervisor(t *testing.T, s *Sandbox, mode string) (hits []string, reached, served bool) {
	t.Helper()
	bgTask(t, s, `echo $$ > /tmp/victim.pid; echo ready; exec sleep 4848`)
	res := attackRun(t, s, "python3 - "+mode, pySignalSupervisor, sandbox.ExecOptions{})
	require.Contains(t, res.Stdout, "done", "the probe did not run: %s %s", res.Stdout, res.Stderr)
	for _, line := range strings.Split(res.Stdout, "\n") {
		if strings.HasPrefix(line, "HIT ") {
			hits = append(hits, line)
		}
	}
	time.Sleep(200 * time.Millisecond) // a SIGTERM that got through has ended the supervisor by now
	next := rtRun(t, s, `grep '^State:' /proc/1/status; for p in /proc/[0-9]*; do grep -q sage-supervisor $p/cmdline 2>/dev/null && grep '^State:' $p/status; done; echo served`, sandbox.ExecOptions{})
	served = strings.HasSuffix(next.Stdout, "served\n") && !next.SessionRestarted && !strings.Contains(next.Stdout, "stopped")
	t.Logf("%d hits; after: restarted %v, %q", len(hits), next.SessionRestarted, next.Stdout)
	return hits, strings.Contains(res.Stdout, "REACHED"), served
}

// TestRedTeamSessionSignalsSpareTheSupervisor: with commands signalling
// each other's processes, no command signals the supervisor, pid 1 or
// any of their threads, by any system call or through their process
// group: each call fails (EPERM), the session sandbox serves on, its
// supervisor not stopped; a background task's process the same probe
// reaches. Under gVisor (no Landlock, no relay) pid 1 is the supervisor,
// which the kernel spares SIGKILL and SIGSTOP only; there the test
// checks that the session still serves.
//
// Control: with a relay that does not refuse them (--signals
// unguarded), the same probe reaches them, in the safe mode (no SIGTERM).
func TestRedTeamSessionSignalsSpareTheSupervisor(t *testing.T) {
	t.Run("bwrap", func(t *testing.T) {
		requireSignalScopes(t)
		hits, reached, served := attackSignalSupervisor(t, attackSession(t, "", nil), "all")
		assert.Empty(t, hits, "a command signalled the supervisor or pid 1")
		assert.True(t, reached, "control: the probe signals a background task's process")
		assert.True(t, served, "the session sandbox did not serve on")
	})
	t.Run("bwrap with the network bridge as pid 1", func(t *testing.T) {
		requireSignalScopes(t)
		s := attackSession(t, "", func(c *sandbox.Config) { c.Local.Network = sandbox.NetworkAllowlist })
		hits, reached, served := attackSignalSupervisor(t, s, "all")
		assert.Empty(t, hits, "a command signalled the supervisor or the bridge")
		assert.True(t, reached, "control: the probe signals a background task's process")
		assert.True(t, served, "the session sandbox did not serve on")
	})
	t.Run("gvisor", func(t *testing.T) {
		requireGvisorInternal(t)
		_, reached, served := attackSignalSupervisor(t, attackSession(t, sandbox.IsolationGvisor, nil), "safe")
		assert.True(t, reached, "control: the probe signals a background task's process")
		assert.True(t, served, "the session sandbox did not serve on")
	})
	t.Run("control", func(t *testing.T) {
		requireSignalScopes(t)
		commandSignals = "unguarded"
		t.Cleanup(func() { commandSignals = "on" })
		hits, reached, _ := attackSignalSupervisor(t, attackSession(t, "", nil), "safe")
		assert.NotEmpty(t, hits, "an unguarded relay signals the supervisor: the test does not see it")
		assert.True(t, reached)
	})
}

// TestRedTeamSessionSignalsKeepPtraceScoped: with the relay on, ptrace
// and descriptors across commands stay denied: a command takes no
// descriptor of, and cannot ptrace, a background task's process or the
// supervisor (pyTakeDescriptors; its control: the command's own child,
// which it reaches). strace -f and gdb on a command's own processes keep
// working, and strace sees the relayed kill.
func TestRedTeamSessionSignalsKeepPtraceScoped(t *testing.T) {
	requireSignalScopes(t)
	s := attackSession(t, "", nil)
	bgTask(t, s, `echo ready; exec sleep 4949`)
	marker := "SAGE-ATTACK-" + randomHex(t)
	res := attackRun(t, s, "python3 - "+marker, pyTakeDescriptors, sandbox.ExecOptions{})
	hits, own := probeLines(t, res, "HIT")
	assert.Empty(t, hits, "a command took a descriptor of, or traced, a process outside itself")
	assert.True(t, own, "control: the probe takes a descriptor of its own child")

	testenv.Command(t, "strace", "apt-get install strace")
	res = rtRun(t, s, `strace -f -e trace=kill -o /tmp/st.log sh -c 'kill -0 "$(pgrep -f "^sleep 4949$")" && echo reached'; grep -c 'kill(' /tmp/st.log`, sandbox.ExecOptions{})
	assert.Equal(t, "reached\n1\n", res.Stdout, "strace -f of a command's own processes, its kill of a task relayed: %s", res.Stderr)
	testenv.Command(t, "gdb", "apt-get install gdb")
	res = rtRun(t, s, `sleep 30 & gdb -q -batch -p $! -ex 'info inferiors' 2>&1; kill $!`, sandbox.ExecOptions{})
	assert.Contains(t, res.Stdout, "detached]", "gdb -p on a command's own child")
	assert.NotContains(t, res.Stdout, "not permitted", "gdb -p on a command's own child")
	res = rtRun(t, s, `gdb -q -batch -p "$(pgrep -f '^sleep 4949$')" -ex 'info inferiors' 2>&1`, sandbox.ExecOptions{})
	assert.Contains(t, res.Stdout, "not permitted", "gdb -p on a background task's process")
}
