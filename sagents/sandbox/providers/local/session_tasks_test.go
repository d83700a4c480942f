//go:build linux

package local_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

// fetchLoop fetches url from inside, retrying for up to ~10 s while the
// server comes up.
const fetchLoop = `for i in $(seq 100); do python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("%s").read().decode())' 2>/dev/null && exit 0; sleep 0.1; done; exit 1`

// A server started with StartBackground runs inside the session sandbox:
// a later command reaches it on localhost, ps shows it, it sees the
// session's /tmp, and KillBackground ends it without ending the session.
func TestSessionBackgroundTaskRunsInTheSession(t *testing.T) {
	requirePython(t)
	s := newSession(t, local.SessionOptions{}, nil)
	ctx := context.Background()
	res := sh(t, s, "echo from-a-command > /tmp/seen; echo served > index.txt", sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	task, err := s.StartBackground(ctx, "cat /tmp/seen; echo ready; exec python3 -m http.server 8766 --bind 127.0.0.1", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Positive(t, task.PID)

	res = sh(t, s, strings.Replace(fetchLoop, "%s", "http://127.0.0.1:8766/index.txt", 1), sandbox.ExecOptions{})
	assert.Equal(t, "served\n", res.Stdout, "the background server answers a later command: %s", res.Stderr)
	res = sh(t, s, "ps -eo args | grep -c '^python3 -m http.server 8766'", sandbox.ExecOptions{})
	assert.Equal(t, "1\n", res.Stdout, "ps in the session shows the task: %s", res.Stderr)
	out, err := s.ReadBackgroundOutput(ctx, task.ID, 0, 0)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out.Text, "from-a-command\nready\n"), "the task sees the session's /tmp; log: %q", out.Text)

	st, err := s.BackgroundStatus(ctx, task.ID)
	require.NoError(t, err)
	assert.True(t, st.Alive)
	require.NoError(t, s.KillBackground(ctx, task.ID, false))
	st, err = s.BackgroundStatus(ctx, task.ID)
	require.NoError(t, err)
	assert.False(t, st.Alive)
	assert.Equal(t, "SIGTERM", st.Signal)
	res = sh(t, s, "cat /tmp/seen; ps -eo args | grep -c '^python3 -m http.server' || true", sandbox.ExecOptions{})
	assert.Equal(t, "from-a-command\n0\n", res.Stdout, "the session lives on, the task is gone: %s", res.Stderr)
	assert.False(t, res.SessionRestarted)

	// The exit status of a task that ends by itself.
	task, err = s.StartBackground(ctx, "exit 7", sandbox.ExecOptions{})
	require.NoError(t, err)
	st = waitDone(t, s, task.ID)
	assert.Equal(t, 7, st.ExitCode)
}

func waitDone(t *testing.T, s *local.Sandbox, id string) sandbox.BackgroundState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := s.BackgroundStatus(context.Background(), id)
		require.NoError(t, err)
		if !st.Alive || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A running background task keeps the session from going idle; Close
// ends the task with the session.
func TestSessionBackgroundTaskKeepsSessionAwakeAndDiesOnClose(t *testing.T) {
	s := newSession(t, local.SessionOptions{IdleTimeout: 300 * time.Millisecond}, nil)
	ctx := context.Background()
	task, err := s.StartBackground(ctx, "sleep 300", sandbox.ExecOptions{})
	require.NoError(t, err)
	pid := s.SessionPID()
	require.NotZero(t, pid)
	time.Sleep(time.Second) // longer than the idle timeout
	assert.Equal(t, pid, s.SessionPID(), "a session with a running task is not idle")
	res := sh(t, s, "ps -eo args | grep -c '^sleep 300$'", sandbox.ExecOptions{})
	assert.Equal(t, "1\n", res.Stdout, res.Stderr)
	require.NoError(t, s.Close(ctx))
	st, err := s.BackgroundStatus(ctx, task.ID)
	require.NoError(t, err)
	assert.False(t, st.Alive)
	if sessionIsolation == "" { // under gVisor the pid is one inside its sandbox, gone with it
		assert.Error(t, syscallKill0(task.PID), "the task's process is gone after Close")
	}
}

// ExecutePython, pip installs and ExecuteJavaScript run in the session
// sandbox: they share its /tmp with shell commands, and the venv made
// after the session started is on PATH for later shell commands.
func TestSessionPythonAndJavaScriptShareTheSession(t *testing.T) {
	requirePython(t)
	s := newSession(t, local.SessionOptions{}, nil)
	ctx := context.Background()
	res := sh(t, s, "echo from-shell > /tmp/shared; sleep 300 & echo $!", sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	sleeper := strings.TrimSpace(res.Stdout)

	pres, err := s.ExecutePython(ctx, "import os\nprint(open('/tmp/shared').read().strip())\nopen('/proc/"+sleeper+"/cmdline').read()\nopen('/tmp/from-py','w').write('py')",
		sandbox.PythonOptions{Requirements: []string{"pip"}, ExecOptions: sandbox.ExecOptions{Env: noFetch}}) // a venv is made, nothing new bound
	require.NoError(t, err)
	assert.Equal(t, "from-shell\n", pres.Stdout, "python sees the session's /tmp and processes: %s", pres.Stderr)
	assert.True(t, pres.Success, pres.Stderr)
	assert.False(t, pres.SessionRestarted)

	res = sh(t, s, "cat /tmp/from-py; echo; which python", sandbox.ExecOptions{})
	assert.Equal(t, "py\n"+local.VenvPath+"/bin/python\n", res.Stdout, "the venv made in the running session is on PATH: %s", res.Stderr)

	testenv.Command(t, "node", testenv.SetupFix+" (apt-get install nodejs)")
	jres, err := s.ExecuteJavaScript(ctx, "console.log(require('fs').readFileSync('/tmp/shared', 'utf8').trim())", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "from-shell\n", jres.Stdout, "node sees the session's /tmp: %s", jres.Stderr)

	// A local find-links directory is a bind the running session lacks:
	// the session restarts with it, and says so.
	wheels := t.TempDir()
	os.Chmod(wheels, 0o755)
	buildWheel(t, wheels)
	pres, err = s.ExecutePython(ctx, "import sagehello; print(sagehello.GREETING)", sandbox.PythonOptions{
		ExecOptions:  sandbox.ExecOptions{Env: map[string]string{"PIP_FIND_LINKS": wheels, "PIP_NO_INDEX": "1"}},
		Requirements: []string{"sagehello==0.1"}})
	require.NoError(t, err)
	assert.Equal(t, "hello from a local wheel\n", pres.Stdout, pres.Stderr)
	assert.True(t, pres.SessionRestarted)
	res = sh(t, s, `python -c 'import sagehello; print(sagehello.GREETING)'`, sandbox.ExecOptions{})
	assert.Equal(t, "hello from a local wheel\n", res.Stdout, "a shell command imports what pip installed: %s", res.Stderr)

}

func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }
