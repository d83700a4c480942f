//go:build linux

package local_test

import (
	"context"
	"os"
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
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newSession is a local sandbox whose shell commands run in one session
// sandbox.
func newSession(t testing.TB, so local.SessionOptions, mutate func(*sandbox.Config)) *local.Sandbox {
	t.Helper()
	requireBwrap(t)
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)}
	if mutate != nil {
		mutate(&cfg)
	}
	if sessionIsolation != "" { // the session tests rerun under gVisor (session_gvisor_test.go)
		requireGvisor(t)
		cfg.Local.Isolation.Linux = sessionIsolation
		cfg.Local.Checkpoints = sessionCheckpoints
	}
	so.Enabled = true
	if so.Supervisor == "" { // the session tests rerun with cmd/sage-supervisor (session_supervisor_test.go)
		so.Supervisor = sessionSupervisor
	}
	s, err := local.NewWithOptions(context.Background(), cfg, local.Options{Session: so})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func sh(t *testing.T, s *local.Sandbox, cmd string, opts sandbox.ExecOptions) *sandbox.CommandResult {
	t.Helper()
	res, err := s.Exec(context.Background(), driver.ExecSpec{Command: cmd, ExecOptions: opts})
	require.NoError(t, err, cmd)
	return res
}

func TestSessionKeepsTmpProcessesAndLocalhost(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	res := sh(t, s, "echo kept > /tmp/f; sleep 300 & echo $!", sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	pid := strings.TrimSpace(res.Stdout)
	// Seen from the next command (which may not signal it: each command
	// is in a Landlock domain of its own where the kernel has them).
	res = sh(t, s, "cat /tmp/f; test -d /proc/"+pid+" && ps -o args= -p "+pid, sandbox.ExecOptions{})
	assert.Equal(t, "kept\nsleep 300\n", res.Stdout, res.Stderr)

	// A server started by one command answers a later one.
	res = sh(t, s, `python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 & echo hello > index.txt`, sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	res = sh(t, s, `for i in $(seq 50); do python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:8765/index.txt").read().decode())' 2>/dev/null && exit 0; sleep 0.1; done; exit 1`, sandbox.ExecOptions{})
	assert.Equal(t, "hello\n", res.Stdout, res.Stderr)
}

func TestSessionTimeoutKillsOnlyThatCommand(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	res := sh(t, s, "sleep 300 & echo $!", sandbox.ExecOptions{})
	keep := strings.TrimSpace(res.Stdout)
	start := time.Now()
	res = sh(t, s, "sleep 100 & sleep 100", sandbox.ExecOptions{Timeout: 300 * time.Millisecond})
	assert.True(t, res.TimedOut)
	assert.False(t, res.Success)
	assert.Less(t, time.Since(start), 5*time.Second)
	res = sh(t, s, "test -d /proc/"+keep+" && echo alive; ps -eo args | grep -c '^sleep 100$'", sandbox.ExecOptions{})
	assert.Equal(t, "alive\n0\n", res.Stdout, res.Stderr)
}

// TestSessionTimeoutKillsTheWholeCommand: a process of the command that
// ignores SIGTERM outlives the leader the timeout's SIGTERM ended; it is
// still the command's, and is killed with it. Control: the same process
// of a command that was not told to end stays (a session keeps a
// command's leftover processes).
func TestSessionTimeoutKillsTheWholeCommand(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	count := func(n string) string {
		res := sh(t, s, "ps -eo args | grep -c '^sleep "+n+"$' || true", sandbox.ExecOptions{})
		return strings.TrimSpace(res.Stdout)
	}
	res := sh(t, s, "(trap '' TERM; exec sleep 301) & sleep 0.2; exit 0", sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	assert.Equal(t, "1", count("301"), "control: a command's leftover process is kept")

	res = sh(t, s, "(trap '' TERM; exec sleep 302) & sleep 100", sandbox.ExecOptions{Timeout: 500 * time.Millisecond})
	assert.True(t, res.TimedOut)
	got := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = count("302"); got == "0" {
			break
		}
	}
	assert.Equal(t, "0", got, "a process of the timed-out command that ignores SIGTERM survived it")
}

func TestSessionExitStatusStdinEnvWorkdir(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	res := sh(t, s, "mkdir -p sub; exit 3", sandbox.ExecOptions{})
	assert.Equal(t, 3, res.ExitCode)
	res = sh(t, s, `pwd; echo "$GREETING"; cat; echo err >&2; kill -9 $$`, sandbox.ExecOptions{
		Workdir: "sub", Env: map[string]string{"GREETING": "hi"}, Stdin: strings.NewReader("in\n")})
	assert.Equal(t, local.DefaultVirtualWorkspace+"/sub\nhi\nin\n", res.Stdout)
	assert.Equal(t, "err\n", res.Stderr)
	assert.Equal(t, 137, res.ExitCode)
	assert.Equal(t, "SIGKILL", res.Signal)
}

func TestSessionsCannotSeeEachOther(t *testing.T) {
	a := newSession(t, local.SessionOptions{}, nil)
	b := newSession(t, local.SessionOptions{}, nil)
	sh(t, a, "echo secret > /tmp/a; sleep 300 &", sandbox.ExecOptions{})
	res := sh(t, b, "cat /tmp/a; ps -eo args | grep -c '^sleep 300$'", sandbox.ExecOptions{})
	assert.Equal(t, "0\n", res.Stdout)
}

func TestSessionCloseKillsAllAndRestartsAfterIdle(t *testing.T) {
	s := newSession(t, local.SessionOptions{IdleTimeout: 300 * time.Millisecond}, nil)
	sh(t, s, "echo x > /tmp/gone; echo y > kept", sandbox.ExecOptions{})
	time.Sleep(time.Second)
	res := sh(t, s, "cat /tmp/gone 2>/dev/null; cat kept", sandbox.ExecOptions{})
	assert.Equal(t, "y\n", res.Stdout)
	assert.True(t, res.SessionRestarted)
	res = sh(t, s, "true", sandbox.ExecOptions{})
	assert.False(t, res.SessionRestarted)
	require.NoError(t, s.Close(context.Background()))
	_, err := s.Exec(context.Background(), driver.ExecSpec{Command: "true"})
	assert.ErrorIs(t, err, sandbox.ErrClosed)
}

// TestSessionSupervisorKilledIsReplaced: a command cannot kill the
// supervisor under bwrap (it is the sandbox's pid 1, whose SIGKILL the
// kernel drops from inside, and outside every command's Landlock domain
// where there are domains); killed from the host, or from inside under
// gVisor, it is replaced.
func TestSessionSupervisorKilledIsReplaced(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	sh(t, s, "echo x > /tmp/f", sandbox.ExecOptions{})
	// From inside, the supervisor is the only sage-supervisor process.
	res, err := s.Exec(context.Background(), driver.ExecSpec{Command: supervisorPID + `; kill -9 "$sup"; sleep 0.2; echo alive`})
	if sessionIsolation == "" { // gVisor's pid 1 may be killed from inside: the session then died with it
		require.NoError(t, err)
		assert.Equal(t, "alive\n", res.Stdout, "a command killed the supervisor: %s", res.Stderr)
		res = sh(t, s, "cat /tmp/f", sandbox.ExecOptions{})
		assert.Equal(t, "x\n", res.Stdout, "the session lives on")
		killSession(t, s)
	}
	res = sh(t, s, "cat /tmp/f 2>/dev/null; echo new", sandbox.ExecOptions{})
	assert.Equal(t, "new\n", res.Stdout, res.Stderr)
	assert.True(t, res.SessionRestarted)
}

func TestSessionFromConfig(t *testing.T) {
	no := false
	s := newLocal(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &no }).Driver().(*local.Sandbox)
	sh(t, s, "echo kept > /tmp/f", sandbox.ExecOptions{})
	res := sh(t, s, "cat /tmp/f", sandbox.ExecOptions{})
	assert.Equal(t, "kept\n", res.Stdout)
	def := newLocal(t, nil).Driver().(*local.Sandbox) // unset: the session sandbox
	sh(t, def, "echo kept > /tmp/f", sandbox.ExecOptions{})
	res = sh(t, def, "cat /tmp/f", sandbox.ExecOptions{})
	assert.Equal(t, "kept\n", res.Stdout)
	perCommand := newLocal(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh }).Driver().(*local.Sandbox)
	sh(t, perCommand, "echo kept > /tmp/f", sandbox.ExecOptions{})
	res, err := perCommand.Exec(context.Background(), driver.ExecSpec{Command: "cat /tmp/f"})
	require.NoError(t, err)
	assert.Empty(t, res.Stdout)
}

// TestSessionWithGvisor: with isolation gvisor, fresh_per_command false
// or unset runs a gVisor session sandbox (one runsc per session: /tmp is
// kept from one command to the next), true a runsc sandbox per command.
func TestSessionWithGvisor(t *testing.T) {
	no := false
	for _, f := range []*bool{&no, nil} {
		s := newGvisor(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = f }).Driver().(*local.Sandbox)
		require.True(t, s.SessionEnabled(), "fresh_per_command %v", f)
		sh(t, s, "echo kept > /tmp/f", sandbox.ExecOptions{})
		pid := s.SessionPID()
		assert.NotZero(t, pid)
		res := sh(t, s, "cat /tmp/f", sandbox.ExecOptions{})
		assert.Equal(t, "kept\n", res.Stdout, res.Stderr)
		assert.Equal(t, pid, s.SessionPID(), "the same runsc")
	}
	perCommand := newGvisor(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh }).Driver().(*local.Sandbox)
	require.False(t, perCommand.SessionEnabled())
	sh(t, perCommand, "echo kept > /tmp/f", sandbox.ExecOptions{})
	res := sh(t, perCommand, "cat /tmp/f 2>/dev/null", sandbox.ExecOptions{})
	assert.Empty(t, res.Stdout)
	assert.Zero(t, perCommand.SessionPID())
}

// zombiesInSession counts the zombie processes the session's commands
// can see (its pid namespace), read from inside.
func zombiesInSession(t *testing.T, s *local.Sandbox) int {
	t.Helper()
	res := sh(t, s, `cat /proc/[0-9]*/status 2>/dev/null | grep -c '^State:[[:space:]]*Z' || true`, sandbox.ExecOptions{})
	n, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	require.NoError(t, err, "zombie count: %q %q", res.Stdout, res.Stderr)
	return n
}

// TestSessionReapsOrphans: a background job whose shell ended becomes the
// supervisor's child (it is the session's subreaper); when it exits it must
// be reaped, else it stays a zombie for the session's life and counts
// against the session's pids limit (a fork bomb left 55-59 of 64 that way).
func TestSessionReapsOrphans(t *testing.T) {
	s := newSession(t, local.SessionOptions{}, nil)
	// Control: the count sees a zombie whose parent lives and does not
	// wait for it (the exec'ed sleep never reaps the short one).
	res := sh(t, s, `sh -c 'sleep 0.05 & exec sleep 3' >/dev/null 2>&1 &`, sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	seen := false
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !seen; time.Sleep(100 * time.Millisecond) {
		seen = zombiesInSession(t, s) > 0
	}
	require.True(t, seen, "control: a zombie that is not the supervisor's is counted")

	res = sh(t, s, `for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; exit 0`, sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	n := -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if n = zombiesInSession(t, s); n == 0 {
			break
		}
	}
	assert.Zero(t, n, "exited orphans stay zombies in the session")
}

// Closing a session whose supervisor does not end on its own within the
// grace (here: stopped) kills the sandbox's pid 1 and returns only once
// every process of the session is gone. bwrap's child runs in a session
// of its own, so killing bwrap's process group reached it only through
// its parent-death signal, after Close had returned: a background job
// was seen alive after Close (the unprivileged TestDaemonStopsWithItsDir
// failed so in CI).
func TestSessionCloseWaitsForItsProcesses(t *testing.T) {
	for i := range 5 {
		s := newSession(t, local.SessionOptions{}, nil)
		mark := "sleep " + strconv.Itoa(900+i) + "." + strconv.Itoa(os.Getpid()%1000)
		res := sh(t, s, mark+" >/dev/null 2>&1 &", sandbox.ExecOptions{})
		require.True(t, res.Success, res.Stderr)
		var job []int
		for deadline := time.Now().Add(5 * time.Second); len(job) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			job = testenv.Processes(mark)
		}
		require.NotEmpty(t, job, "the background job runs")
		outer := s.SessionPID()
		require.NotZero(t, outer)
		for _, pid := range testenv.Children(outer) {
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP)) // the supervisor will not see its socket close
		}
		require.NoError(t, s.Close(context.Background()))
		require.Empty(t, testenv.Processes(mark), "round %d: the session's background job outlived Close", i)
	}
}
