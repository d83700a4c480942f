package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

var sageBin string

// sageBinEnv names a sage binary the tests run instead of building one:
// a test rerun as another user (TestSessionAttacksUnprivileged) gets the
// build of the run that started it.
const sageBinEnv = "SAGE_TEST_SAGE_BIN"

func TestMain(m *testing.M) {
	if sageBin = os.Getenv(sageBinEnv); sageBin != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sage-cli-test-")
	if err != nil {
		panic(err)
	}
	sageBin = filepath.Join(dir, "sage")
	if out, err := exec.Command("go", "build", "-o", sageBin, ".").CombinedOutput(); err != nil {
		panic("build sage: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type cliRun struct {
	stdout, stderr string
	code           int
}

// No input may hang sage: every run of it in these tests has a deadline
// (cliDeadline, generous for a loaded machine: a run that needs more has
// a bug), after which it gets SIGTERM and, termGrace later, SIGKILL; the
// test fails either way. Tests that start sage themselves (servers) call
// watchdog.
const (
	cliDeadline = 4 * time.Minute
	// termGrace is how long sage has to end after SIGTERM: every command
	// ends within its grace (a command's SIGTERM-then-SIGKILL grace and a
	// server's --shutdown-grace are shorter).
	termGrace = 45 * time.Second
)

// sage runs the built binary with a private SAGE_HOME.
func sage(t *testing.T, home, stdin string, args ...string) cliRun {
	t.Helper()
	return runCmd(t, cliCommand(home, stdin, args...))
}

// cliCommand is the command sage runs: the built binary with a private
// SAGE_HOME, passthrough mode unless a flag says otherwise, stdin.
func cliCommand(home, stdin string, args ...string) *exec.Cmd {
	cmd := exec.Command(sageBin, args...)
	cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "SAGE_SANDBOX_MODE=passthrough")
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

// runCmd runs cmd under cliDeadline and returns what it printed and its
// exit code (a non-zero exit is not an error); not starting, or not
// ending by the deadline, fails the test.
func runCmd(t testing.TB, cmd *exec.Cmd) cliRun {
	t.Helper()
	return runCmdWithin(t, cmd, cliDeadline)
}

// runCmdWithin is runCmd with another deadline.
func runCmdWithin(t testing.TB, cmd *exec.Cmd, deadline time.Duration) cliRun {
	t.Helper()
	var out, errb testenv.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &errb
	}
	require.NoError(t, cmd.Start(), "start %v", cmd.Args)
	stop := watchdogWithin(t, cmd, deadline)
	err := cmd.Wait()
	stop()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Errorf("%v: %v", cmd.Args, err)
	}
	return cliRun{out.String(), errb.String(), code}
}

// watchdog fails the test when the started cmd has not ended within
// cliDeadline (it is sent SIGTERM then, and SIGKILL termGrace later);
// the returned func, which the test's cleanup also calls, disarms it.
func watchdog(t testing.TB, cmd *exec.Cmd) func() {
	t.Helper()
	return watchdogWithin(t, cmd, cliDeadline)
}

func watchdogWithin(t testing.TB, cmd *exec.Cmd, deadline time.Duration) func() {
	var once sync.Once
	done := make(chan struct{})
	p := cmd.Process
	go func() {
		select {
		case <-done:
			return
		case <-time.After(deadline):
		}
		if p.Signal(syscall.SIGTERM) != nil {
			return // it has ended and was waited for
		}
		t.Errorf("%v did not end within %v: sent SIGTERM", cmd.Args, deadline)
		select {
		case <-done:
		case <-time.After(termGrace):
			t.Errorf("%v did not end within %v of SIGTERM: killed", cmd.Args, termGrace)
			p.Kill()
		}
	}()
	stop := func() { once.Do(func() { close(done) }) }
	t.Cleanup(stop)
	return stop
}

func TestExecStreamsAndExitsWithTheCommandsCode(t *testing.T) {
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "exec", "--", "echo out; echo err >&2; exit 3")
	assert.Equal(t, 3, r.code)
	assert.Equal(t, "out\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)
	_, err := os.Stat(filepath.Join(home, "sessions/default/workspace"))
	assert.NoError(t, err, "default workspace is $SAGE_HOME/sessions/<session>/workspace")
}

func TestExecArgvIsQuoted(t *testing.T) {
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--", "printf", "%s|", "a b", "it's", "$HOME")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "a b|it's|$HOME|", r.stdout)
}

func TestExecJSON(t *testing.T) {
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--json", "--env", "X=42", "--", "echo $X")
	require.Equal(t, 0, r.code, r.stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw))
	for _, k := range []string{"success", "stdout", "stderr", "exit_code", "duration_ms", "timed_out", "truncated", "stdout_dropped_bytes", "stderr_dropped_bytes"} {
		assert.Contains(t, raw, k)
	}
	var res sandbox.CommandResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, "42\n", res.Stdout)
	assert.True(t, res.Success)
}

func TestExecTimeoutExits124(t *testing.T) {
	start := time.Now()
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--timeout", "500ms", "--", "echo partial; sleep 30")
	assert.Equal(t, 124, r.code)
	assert.Equal(t, "partial\n", r.stdout)
	assert.Regexp(t, `^sage: timed out after 500ms( \(killed by SIG[A-Z]+\))?\n$`, r.stderr)
	assert.Less(t, time.Since(start), 10*time.Second)

	r = sage(t, sandboxtest.TempDir(t), "", "exec", "--json", "--timeout", "1s", "--", "sleep 10")
	assert.Equal(t, 124, r.code)
	assert.Regexp(t, `^sage: timed out after 1s( \(killed by SIG[A-Z]+\))?\n$`, r.stderr)
	var res sandbox.CommandResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "stdout is the JSON alone: %q", r.stdout)
	assert.True(t, res.TimedOut)
}

func TestBadConfigExits2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "vm"}, `--mode="vm": unknown mode`},
		{[]string{"--mount", "/nonexistent-dir-xyz:/data"}, "for --mount: host path: stat /nonexistent-dir-xyz: no such file"},
		{[]string{"--session", "../x"}, `--session "../x"`},
		{[]string{"--timeout", "-1s"}, "--timeout -1s is negative"},
		{[]string{"--mode", "remote"}, "set --remote-provider aio or SAGE_REMOTE_PROVIDER=aio"},
	} {
		r := sage(t, sandboxtest.TempDir(t), "", append(append([]string{"exec"}, tc.args...), "--", "true")...)
		assert.Equal(t, 2, r.code, "%v", tc.args)
		assert.True(t, strings.HasPrefix(r.stderr, "sage"), r.stderr)
		assert.Contains(t, r.stderr, tc.want)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--mode", "remote", "--", "true")
	assert.Equal(t, "sage: remote mode needs a provider: set --remote-provider aio or SAGE_REMOTE_PROVIDER=aio\n", r.stderr)
	r = sage(t, sandboxtest.TempDir(t), "", "exec", "--bogus-flag", "--", "true")
	assert.Equal(t, 2, r.code)
	assert.Equal(t, "sage exec: unknown flag --bogus-flag; see 'sage exec --help'\n", r.stderr)
}

// TestSandboxErrorExits125: a sandbox that cannot run the command (here a
// sandbox server nobody serves) keeps 125, with one line.
func TestSandboxErrorExits125(t *testing.T) {
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--mode", "remote", "--remote-provider", "aio", "--remote-url", "http://127.0.0.1:1", "--", "true")
	assert.Equal(t, 125, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, "sage: "), r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
}

func TestExecStdinAndMount(t *testing.T) {
	data := sandboxtest.TempDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(data, "f.txt"), []byte("from mount"), 0o644))
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "piped\n", "exec", "--", "cat")
	assert.Equal(t, "piped\n", r.stdout)
	r = sage(t, home, "", "fs", "read", "--mount", data+":/mnt/data:ro", "/mnt/data/f.txt")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "from mount", r.stdout)
	r = sage(t, home, "x", "fs", "write", "/mnt/data/f.txt", "--mount", data+":/mnt/data:ro")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "read-only")
}

func TestFS(t *testing.T) {
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "hello\n", "fs", "write", "notes/a.txt")
	require.Equal(t, 0, r.code, r.stderr)
	r = sage(t, home, "more\n", "fs", "write", "--append", "notes/a.txt")
	require.Equal(t, 0, r.code, r.stderr)
	r = sage(t, home, "", "fs", "read", "notes/a.txt")
	assert.Equal(t, "hello\nmore\n", r.stdout)
	r = sage(t, home, "", "fs", "ls", "notes")
	assert.Contains(t, r.stdout, " a.txt\n", "plain names print unquoted, as ls prints them")
	r = sage(t, home, "", "fs", "ls", "--json", "notes")
	var list []sandbox.FileInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 1)
	assert.EqualValues(t, 11, list[0].Size)
	r = sage(t, home, "", "fs", "tree", ".")
	assert.Equal(t, "workspace/\n  notes/\n    a.txt\n", r.stdout)
	r = sage(t, home, "", "fs", "rm", "notes")
	assert.Equal(t, 0, r.code, r.stderr)
	r = sage(t, home, "", "fs", "read", "notes/a.txt")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no such file")
	r = sage(t, home, "", "fs", "read", "../../etc/passwd")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "outside")
	r = sage(t, home, "", "fs", "chmod", "x")
	assert.Equal(t, 2, r.code)
}

func TestDoctorJSON(t *testing.T) {
	r := sage(t, sandboxtest.TempDir(t), "", "doctor", "--json")
	var rep struct {
		OS     string `json:"os"`
		OK     bool   `json:"ok"`
		Checks []struct{ Name, Status, Detail, Fix string }
		// LimitsEnforced: how local mode's limits hold for this user.
		LimitsEnforced map[string]string `json:"limits_enforced"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	names := map[string]bool{}
	for _, c := range rep.Checks {
		names[c.Name] = true
		assert.NotEmpty(t, c.Status)
	}
	for _, n := range []string{"bwrap", "user namespaces", "apparmor userns", "cgroups", "seatbelt", "docker", "redis", "otlp endpoint", "local limits", "workspace quota", "idmapped workspace", "session isolation"} {
		assert.True(t, names[n], n)
	}
	holds, _ := local.SessionIsolationSummary()
	for _, c := range rep.Checks {
		if c.Name == "session isolation" && holds {
			assert.Equal(t, "ok", c.Status, "this kernel scopes signals: %s", c.Detail)
			assert.Contains(t, c.Detail, "Landlock domain of its own")
		}
	}
	for _, c := range rep.Checks {
		if c.Name == "gvisor" && c.Status == "ok" {
			assert.True(t, names["gvisor checkpoints"], "runsc works: doctor probes its checkpoint and restore")
		}
		if c.Name == "gvisor checkpoints" {
			assert.Contains(t, c.Detail, "runsc checkpoint", c.Detail)
			assert.NotContains(t, c.Detail, "\n", "one line")
		}
	}
	assert.Equal(t, rep.OK, r.code == 0)
	for _, k := range []string{"cpu_time", "memory", "pids", "file_size"} {
		assert.Contains(t, []string{"cgroup", "userns", "rlimit-per-user", "rlimit-per-process", "none"}, rep.LimitsEnforced[k], k)
	}
	for _, c := range rep.Checks {
		if os.Geteuid() == 0 {
			assert.NotContains(t, c.Fix, "run sage as root", "%s: sage runs as root already", c.Name)
		}
		assert.NotContains(t, c.Fix, "fix: ", "%s: the fix is said once", c.Name)
	}
}

func TestVersionAndUsage(t *testing.T) {
	r := sage(t, sandboxtest.TempDir(t), "", "version")
	assert.Equal(t, 0, r.code)
	assert.True(t, strings.HasPrefix(r.stdout, "sage "), r.stdout)
	assert.Contains(t, r.stdout, "module:   github.com/sage-go/sage ")
	v := sage(t, sandboxtest.TempDir(t), "", "--version")
	assert.Equal(t, 0, v.code)
	assert.Equal(t, r.stdout, v.stdout)
	r = sage(t, sandboxtest.TempDir(t), "", "nope")
	assert.Equal(t, 2, r.code)
	assert.Equal(t, "sage: unknown command \"nope\"; see 'sage --help'\n", r.stderr)
	for _, args := range [][]string{{"--help"}, {"fs", "-h"}, {"help", "exec"}} {
		r = sage(t, sandboxtest.TempDir(t), "", args...)
		assert.Equal(t, 0, r.code, "%v", args)
		assert.Empty(t, r.stderr, "%v", args)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: sage "), "%v: %q", args, r.stdout)
	}
	r = sage(t, sandboxtest.TempDir(t), "")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "commands:")
}

func TestShellJoin(t *testing.T) {
	assert.Equal(t, "echo $HOME | wc", shellJoin([]string{"echo $HOME | wc"}))
	assert.Equal(t, `ls -la 'a b' 'it'\''s' ''`, shellJoin([]string{"ls", "-la", "a b", "it's", ""}))
}

func TestExecLocalLimitsFromFlags(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "exec", "--mode", "local", "--file-size", "1", "--", "head -c 5000000 /dev/zero > f; stat -c %s f; pwd")
	assert.Equal(t, "1048576\n/workspace\n", r.stdout, r.stderr)
	r = sage(t, home, "", "exec", "--mode", "local", "--network", "sometimes", "--", "true")
	assert.Equal(t, 2, r.code, "a bad setting exits like a bad flag")
	assert.Contains(t, r.stderr, `--network="sometimes"`, "the error names the flag given")
	r = sage(t, home, "", "exec", "--mode", "local", "--memory", "lots", "--", "true")
	assert.Equal(t, 2, r.code)
}

// --disk-quota gives the workspace its own file system as root, and is
// refused (exit 2, naming the setting) where it cannot be enforced.
func TestExecDiskQuotaFromFlag(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "exec", "--mode", "local", "--disk-quota", "8", "--", "true")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `--disk-quota="8"`)
	enforced, _ := local.DiskQuotaSummary()
	r = sage(t, home, "", "exec", "--mode", "local", "--disk-quota", "16", "--", "head -c 20000000 /dev/zero > f; echo rc=$?")
	if !enforced {
		assert.Equal(t, 2, r.code, r.stdout)
		assert.Contains(t, r.stderr, "cannot be enforced")
		assert.Contains(t, r.stderr, "fix:")
		return
	}
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "rc=1\n", r.stdout)
	assert.Contains(t, r.stderr, "No space left on device")
	r = sage(t, home, "", "exec", "--mode", "local", "--", "head -c 20000000 /dev/zero > g; echo rc=$?")
	assert.Equal(t, "rc=0\n", r.stdout, "control: without the quota the write fits")
}

// A command killed for its CPU budget says so, in JSON and in words.
func TestExecCPUTimeExceeded(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home := sandboxtest.TempDir(t)
	hog := "for i in 1 2 3; do (while :; do :; done) & done; wait"
	r := sage(t, home, "", "exec", "--mode", "local", "--cpu-time", "1", "--json", "--", hog)
	if os.Geteuid() != 0 && r.code == 125 { // no writable cgroup for an ordinary user
		assert.Contains(t, r.stderr, "--cpu-time 0")
		return
	}
	var res struct {
		ExitCode        int               `json:"exit_code"`
		CPUTimeExceeded bool              `json:"cpu_time_exceeded"`
		LimitsEnforced  map[string]string `json:"limits_enforced"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "stdout %q, stderr %q", r.stdout, r.stderr)
	assert.True(t, res.CPUTimeExceeded)
	assert.Equal(t, 152, res.ExitCode)
	assert.Equal(t, 152, r.code)
	assert.Equal(t, "cgroup", res.LimitsEnforced["cpu_time"])
	r = sage(t, home, "", "exec", "--mode", "local", "--cpu-time", "1", "--", hog)
	assert.Equal(t, 152, r.code)
	assert.Contains(t, r.stderr, "used up its CPU time limit")
	r = sage(t, home, "", "exec", "--mode", "local", "--cpu-time", "1", "--", "echo fine") // control
	assert.Equal(t, 0, r.code)
	assert.NotContains(t, r.stderr, "CPU time")
}

func TestPython(t *testing.T) {
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3 python3-venv)")
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "python", "--mode", "passthrough", "-c", "import sys; print('py', sys.version_info[0]); sys.exit(5)")
	assert.Equal(t, 5, r.code, r.stderr)
	assert.Equal(t, "py 3\n", r.stdout)
	f := filepath.Join(sandboxtest.TempDir(t), "x.py")
	require.NoError(t, os.WriteFile(f, []byte("print(40 + 2)\n"), 0o644))
	r = sage(t, home, "", "python", "--mode", "passthrough", f)
	assert.Equal(t, "42\n", r.stdout, r.stderr)
	r = sage(t, home, "", "python")
	assert.Equal(t, 2, r.code)
}
