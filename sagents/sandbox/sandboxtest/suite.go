package sandboxtest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// Options configure the suite for one provider.
type Options struct {
	// New returns a fresh sandbox with an empty workspace. The suite
	// closes it.
	New func(t *testing.T) *sandbox.Sandbox
	// HostProcesses says that processes started in the sandbox are visible
	// in this host's /proc (true for local and passthrough), so the suite
	// can prove that no process of a killed command survives.
	HostProcesses bool
	// NoBackground skips background-task tests (the provider returns
	// ErrUnsupported, which the suite then checks).
	NoBackground bool
	// SignalsAsExitCodes says that a command killed by a signal inside the
	// sandbox is reported as exit code 128+n without a Signal name (bwrap
	// exits with that code and cannot tell the two apart).
	SignalsAsExitCodes bool
	// NoTaskPIDs says that BackgroundTask.PID is not reported (remote
	// providers: the API has no pid), so the Close check that a task's
	// process is gone is skipped even when HostProcesses is set.
	NoTaskPIDs bool
	// PythonResults says that ExecutePython shows the value of a cell's
	// last expression on stdout, as a notebook does (opensandbox's code
	// contexts); otherwise code runs as a script and an expression alone
	// prints nothing.
	PythonResults bool
}

// Run runs the contract suite.
func Run(t *testing.T, o Options) {
	t.Run("Exec", func(t *testing.T) { testExec(t, o) })
	t.Run("Timeout", func(t *testing.T) { testTimeout(t, o) })
	t.Run("Output", func(t *testing.T) { testOutput(t, o) })
	t.Run("Files", func(t *testing.T) { testFiles(t, o) })
	t.Run("Escapes", func(t *testing.T) { testEscapes(t, o) })
	t.Run("Background", func(t *testing.T) { testBackground(t, o) })
	t.Run("Close", func(t *testing.T) { testClose(t, o) })
}

func open(t *testing.T, o Options) *sandbox.Sandbox {
	t.Helper()
	h := o.New(t)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func run(t *testing.T, h *sandbox.Sandbox, cmd string, opts driver.ExecOptions) *driver.CommandResult {
	t.Helper()
	res, err := h.ExecuteCommand(ctx(t), cmd, opts)
	require.NoError(t, err, "command %q", cmd)
	return res
}

func testExec(t *testing.T, o Options) {
	h := open(t, o)
	t.Run("stdout and stderr apart", func(t *testing.T) {
		res := run(t, h, "echo out; echo err >&2", driver.ExecOptions{})
		assert.True(t, res.Success)
		assert.Equal(t, "out\n", res.Stdout)
		assert.Equal(t, "err\n", res.Stderr)
		assert.Equal(t, 0, res.ExitCode)
		assert.False(t, res.TimedOut)
	})
	t.Run("exit code", func(t *testing.T) {
		res := run(t, h, "exit 7", driver.ExecOptions{})
		assert.False(t, res.Success)
		assert.Equal(t, 7, res.ExitCode)
		assert.Empty(t, res.Signal)
	})
	t.Run("killed by signal", func(t *testing.T) {
		res := run(t, h, "kill -TERM $$", driver.ExecOptions{})
		assert.False(t, res.Success)
		assert.Equal(t, 128+15, res.ExitCode)
		if !o.SignalsAsExitCodes {
			assert.Equal(t, "SIGTERM", res.Signal)
		}
		res = run(t, h, "echo before; kill -KILL $$", driver.ExecOptions{})
		assert.False(t, res.Success)
		assert.Equal(t, 128+9, res.ExitCode)
		assert.Equal(t, "before\n", res.Stdout, "output before the signal is kept")
		if !o.SignalsAsExitCodes {
			assert.Equal(t, "SIGKILL", res.Signal)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		res := run(t, h, "tr a-z A-Z", driver.ExecOptions{Stdin: strings.NewReader("hello\n")})
		assert.Equal(t, "HELLO\n", res.Stdout)
	})
	t.Run("no stdin reads EOF", func(t *testing.T) {
		res := run(t, h, "cat; echo done", driver.ExecOptions{})
		assert.Equal(t, "done\n", res.Stdout)
	})
	t.Run("env isolation", func(t *testing.T) {
		t.Setenv("SAGE_TEST_SECRET", "hunter2")
		res := run(t, h, "env", driver.ExecOptions{Env: map[string]string{"GIVEN": "yes"}})
		assert.NotContains(t, res.Stdout, "hunter2")
		assert.Contains(t, res.Stdout, "GIVEN=yes\n")
		assert.Contains(t, res.Stdout, "HOME=")
	})
	t.Run("bad env name", func(t *testing.T) {
		_, err := h.ExecuteCommand(ctx(t), "true", driver.ExecOptions{Env: map[string]string{"A=B": "x"}})
		assert.ErrorContains(t, err, "A=B")
	})
	t.Run("argument too long", func(t *testing.T) {
		// The longest command line that fits runs (the control); one byte
		// more is refused alike in every mode, with the fix, before
		// anything runs: no mode's own limit (sh -c's E2BIG, a request
		// size) shows through.
		fits := "echo ok #" + strings.Repeat("a", driver.MaxArgBytes-len("echo ok #"))
		res := run(t, h, fits, driver.ExecOptions{})
		assert.Equal(t, "ok\n", res.Stdout, res.Stderr)
		for _, tc := range []struct {
			cmd string
			env map[string]string
		}{{fits + "a", nil}, {"true", map[string]string{"BIG": strings.Repeat("x", driver.MaxArgBytes)}}} {
			_, err := h.ExecuteCommand(ctx(t), tc.cmd, driver.ExecOptions{Env: tc.env})
			require.ErrorIs(t, err, driver.ErrTooLong)
			assert.ErrorIs(t, err, fs.ErrInvalid)
			assert.ErrorContains(t, err, "fix: write it to a file")
			_, err = h.StartBackground(ctx(t), tc.cmd, driver.ExecOptions{Env: tc.env})
			assert.ErrorIs(t, err, driver.ErrTooLong)
		}
	})
	t.Run("runs in the workspace", func(t *testing.T) {
		require.NoError(t, h.EnsureDirectory(ctx(t), "sub"))
		res := run(t, h, "pwd", driver.ExecOptions{})
		assert.Equal(t, h.WorkspacePath()+"\n", res.Stdout)
		res = run(t, h, "pwd", driver.ExecOptions{Workdir: "sub"})
		assert.Equal(t, h.WorkspacePath()+"/sub\n", res.Stdout)
	})
	t.Run("missing workdir", func(t *testing.T) {
		_, err := h.ExecuteCommand(ctx(t), "true", driver.ExecOptions{Workdir: "no/such/dir"})
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("streaming callbacks", func(t *testing.T) {
		var out, errs strings.Builder
		res := run(t, h, "echo a; echo b >&2; echo c", driver.ExecOptions{
			OnStdout: func(p []byte) { out.Write(p) }, OnStderr: func(p []byte) { errs.Write(p) }})
		assert.Equal(t, res.Stdout, out.String())
		assert.Equal(t, "b\n", errs.String())
	})
	t.Run("python", func(t *testing.T) {
		res, err := h.ExecutePython(ctx(t), "import sys\nprint(6*7)\nsys.exit(3)", driver.PythonOptions{})
		if errors.Is(err, driver.ErrUnsupported) {
			t.Skipf("python unsupported here: %v", err)
		}
		require.NoError(t, err)
		assert.Equal(t, "42\n", res.Stdout)
		assert.Equal(t, 3, res.ExitCode)
	})
	t.Run("python expression and exception", func(t *testing.T) {
		var streamed strings.Builder
		res, err := h.ExecutePython(ctx(t), "print('a')\n6*7", driver.PythonOptions{})
		if errors.Is(err, driver.ErrUnsupported) {
			t.Skipf("python unsupported here: %v", err)
		}
		require.NoError(t, err)
		assert.True(t, res.Success)
		if o.PythonResults {
			assert.Equal(t, "a\n42\n", res.Stdout, "the last expression's value is shown")
		} else {
			assert.Equal(t, "a\n", res.Stdout, "a script prints no expression's value")
		}
		res, err = h.ExecutePython(ctx(t), "raise ValueError('bad value')",
			driver.PythonOptions{ExecOptions: driver.ExecOptions{OnStderr: func(p []byte) { streamed.Write(p) }}})
		require.NoError(t, err)
		assert.Equal(t, 1, res.ExitCode)
		assert.Contains(t, res.Stderr, "ValueError: bad value")
		assert.Contains(t, streamed.String(), "ValueError: bad value", "the traceback reaches the stderr callback too")
	})
}

func testTimeout(t *testing.T, o Options) {
	h := open(t, o)
	t.Run("kills the process tree and keeps output", func(t *testing.T) {
		token := "10" + strings.ReplaceAll(time.Now().Format(".000000"), ".", ".7")
		cmd := "echo started; sleep " + token + " & sleep " + token + "; wait"
		start := time.Now()
		res := run(t, h, cmd, driver.ExecOptions{Timeout: time.Second})
		elapsed := time.Since(start)
		assert.Less(t, elapsed, 3*time.Second+driver.DefaultKillGrace, "timed-out command took %v", elapsed)
		assert.True(t, res.TimedOut)
		assert.False(t, res.Success)
		assert.Equal(t, "started\n", res.Stdout, "%+v", res)
		if o.HostProcesses {
			assert.Eventually(t, func() bool { return len(processesWith(token)) == 0 }, 2*time.Second, 50*time.Millisecond,
				"processes of the timed-out command survive: %v", processesWith(token))
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		c, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		res, err := h.ExecuteCommand(c, "echo x; sleep 30", driver.ExecOptions{Timeout: time.Minute})
		assert.ErrorIs(t, err, context.Canceled)
		if res != nil {
			assert.False(t, res.Success)
		}
	})
	t.Run("background child holding the pipe", func(t *testing.T) {
		start := time.Now()
		res := run(t, h, "sleep 30 & echo parent done", driver.ExecOptions{Timeout: 20 * time.Second})
		assert.Less(t, time.Since(start), 10*time.Second)
		assert.Equal(t, "parent done\n", res.Stdout)
	})
}

// processesWith lists the pids whose command line contains token.
func processesWith(token string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), token) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func testOutput(t *testing.T, o Options) {
	h := open(t, o)
	t.Run("50 MB on stderr", func(t *testing.T) {
		res := run(t, h, "head -c 50000000 /dev/zero | tr '\\0' x >&2; echo ok", driver.ExecOptions{Timeout: 50 * time.Second})
		assert.True(t, res.Success, "exit %d stderr-tail %q", res.ExitCode, tail(res.Stderr))
		assert.Equal(t, "ok\n", res.Stdout)
		assert.True(t, res.Truncated)
		assert.Greater(t, res.StderrDroppedBytes, int64(40_000_000))
		assert.Zero(t, res.StdoutDroppedBytes)
		assert.Contains(t, res.Stderr, "bytes omitted")
		assert.Less(t, len(res.Stderr), driver.DefaultOutputLimit)
	})
	t.Run("many lines and no final newline", func(t *testing.T) {
		var streamed strings.Builder
		res := run(t, h, "seq 1 35000; printf 'last\\n\\nno end'", driver.ExecOptions{OnStdout: func(p []byte) { streamed.Write(p) }})
		want := seqLines(35000) + "last\n\nno end"
		assert.Equal(t, len(want), len(res.Stdout), "every byte, none added")
		assert.True(t, res.Stdout == want, "the bytes the command wrote (tail %q)", tail(res.Stdout))
		assert.Equal(t, want, streamed.String(), "the callback got the same bytes")
		res = run(t, h, "printf 'cr\\rcrlf\\r\\nend\\n'; printf 'e1\\ne2' >&2", driver.ExecOptions{})
		assert.Equal(t, "cr\rcrlf\r\nend\n", res.Stdout, "carriage returns are kept")
		assert.Equal(t, "e1\ne2", res.Stderr)
	})
	t.Run("custom limit keeps head and tail", func(t *testing.T) {
		res := run(t, h, "seq 1 100000", driver.ExecOptions{OutputLimit: 200})
		assert.True(t, strings.HasPrefix(res.Stdout, "1\n2\n3\n"), res.Stdout)
		assert.True(t, strings.HasSuffix(res.Stdout, "99999\n100000\n"), res.Stdout)
		assert.True(t, res.Truncated)
	})
}

// seqLines is what seq 1 n prints.
func seqLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}
