package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// badCase is one bad input a newcomer tried (issue 37, items 3 and 4):
// sage must answer with one line on stderr that names the input and the
// fix, exit with the code of docs/cli.md, and leave nothing behind.
type badCase struct {
	name  string
	args  []string
	env   []string // KEY=VALUE added to the environment
	code  int
	wants []string // each on the one line: the input, the fix
	// stdout is what sage may print on stdout (most print nothing).
	stdout string
}

// runBad runs c in a fresh SAGE_HOME and checks the answer and that
// nothing was left: no process, no daemon socket, lock or info file, no
// mount under the home.
func runBad(t *testing.T, c badCase) cliRun {
	t.Helper()
	home := shortHome(t)
	cmd := cliCommand(home, "", c.args...)
	cmd.Env = append(cmd.Env, c.env...)
	r := runCmd(t, cmd)
	assert.Equal(t, c.code, r.code, "%s: exit code; stderr %q", c.name, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "%s: one line on stderr: %q", c.name, r.stderr)
	for _, w := range c.wants {
		assert.Contains(t, r.stderr, w, c.name)
	}
	assert.Equal(t, c.stdout, r.stdout, "%s: stdout", c.name)
	assertNothingLeftIn(t, home, c.name)
	return r
}

// assertNothingLeftIn checks that a run with SAGE_HOME home left no
// process, no session daemon's socket, lock or info, and no mount.
func assertNothingLeftIn(t *testing.T, home, name string) {
	t.Helper()
	assert.Empty(t, running(home), "%s: a process of the run is left", name)
	assert.Empty(t, runningWith("SAGE_HOME="+home), "%s: a process of the run (a session daemon, say) is left", name)
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err == nil && filepath.Base(filepath.Dir(p)) == "daemon" && (d.Name() == "sock" || d.Name() == "lock" || d.Name() == "info") {
			t.Errorf("%s: %s left behind", name, p)
		}
		return nil
	})
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	assert.NotContains(t, string(mounts), home, "%s: a mount is left", name)
}

// shortHome is a SAGE_HOME whose session sockets fit a unix socket's
// path (a test's TempDir holds the test's name).
func shortHome(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sg")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(d, 0o711))
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(sandboxtest.TempDir(t), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestBadInputsNameTheInputAndTheFix(t *testing.T) {
	policy := writeFile(t, "policy.yaml", "rules:\n  - pattern: x\n    bogus: 1\n")
	huge := strings.Repeat("a", driver.MaxArgBytes+1)
	for _, c := range []badCase{
		{name: "a duration without its unit", args: []string{"exec", "--timeout", "5", "--", "true"}, code: 2,
			wants: []string{`invalid value "5" for --timeout`, "want a duration with its unit, such as 5s"}},
		{name: "an idle timeout that is no duration", args: []string{"session", "serve", "--idle-timeout", "later", "s"}, code: 2,
			wants: []string{"--idle-timeout", "want a duration such as 30s"}},
		{name: "a limit that is no number", args: []string{"exec", "--memory", "lots", "--", "true"}, code: 2,
			wants: []string{`invalid value "lots" for --memory`, "want a whole number"}},
		{name: "a variable that is no number", args: []string{"exec", "--", "true"}, env: []string{"SAGE_LOCAL_MEMORY_LIMIT_MB=lots"}, code: 2,
			wants: []string{`SAGE_LOCAL_MEMORY_LIMIT_MB="lots"`, "want a whole number"}},
		{name: "an unknown remote provider", args: []string{"exec", "--mode", "remote", "--remote-provider", "e2b", "--", "true"}, code: 2,
			wants: []string{`--remote-provider="e2b"`, "want aio or opensandbox"}},
		{name: "an unknown remote provider in the environment", args: []string{"exec", "--mode", "remote", "--", "true"},
			env: []string{"SAGE_REMOTE_PROVIDER=e2b"}, code: 2, wants: []string{`SAGE_REMOTE_PROVIDER="e2b"`, "want aio or opensandbox"}},
		{name: "a bad setting names its flag", args: []string{"exec", "--network", "sometimes", "--mode", "local", "--", "true"}, code: 2,
			wants: []string{`--network="sometimes"`}},
		{name: "a command line too long for any sandbox", args: []string{"exec", "--", huge}, code: 2,
			wants: []string{"the command line is 126977 bytes", "fix: write it to a file in the workspace (sage fs write script.sh < script.sh)"}},
		{name: "an --env value too long", args: []string{"exec", "--env", "BIG=" + huge, "--", "true"}, code: 2,
			wants: []string{"environment variable BIG is", "fix: write it to a file"}},
		{name: "a session's too long command line", args: []string{"exec", "--session", "s", "--", huge}, code: 2,
			wants: []string{"fix: write it to a file in the workspace (sage fs write --session s script.sh < script.sh) and run that (sage exec --session s -- sh script.sh)"}},
		{name: "probe without a URL", args: []string{"probe", "--model", "m"}, env: []string{"OPENAI_BASE_URL="}, code: 2,
			wants: []string{"sage probe: missing --base-url URL (or set OPENAI_BASE_URL)"}},
		{name: "probe without a model", args: []string{"probe", "--base-url", "http://127.0.0.1:1/v1"}, env: []string{"SAGE_MODEL="}, code: 2,
			wants: []string{"sage probe: missing --model NAME (or set SAGE_MODEL)"}},
		{name: "a URL that is no URL", args: []string{"probe", "--base-url", "ht!tp://x", "--model", "m"}, code: 2,
			wants: []string{`--base-url: "ht!tp://x" is not a URL`, "want one such as http://localhost:11434/v1"}},
		{name: "a URL that is no URL, from the environment", args: []string{"probe", "--model", "m"}, env: []string{"OPENAI_BASE_URL=localhost:8000"}, code: 2,
			wants: []string{`OPENAI_BASE_URL: "localhost:8000": want an http:// or https:// URL`}},
		{name: "the agent's URL", args: []string{"agent", "--model", "m", "--base-url", "ht!tp://x", "--mode", "passthrough", "hi"}, code: 2,
			wants: []string{`--base-url: "ht!tp://x" is not a URL`}},
		{name: "a prompt cache mode", args: []string{"agent", "--model", "scripted", "--prompt-cache", "bogus", "--mode", "passthrough"}, code: 2,
			wants: []string{`--prompt-cache: prompt cache mode "bogus": want auto, breakpoints, key or off`}},
		{name: "a policy's unknown key", args: []string{"agent", "--model", "scripted", "--policy", policy, "--mode", "passthrough"}, code: 2,
			wants: []string{"--policy " + policy + ": rules[0].pattern: unknown key (line 2); rules[0] takes decision, match, name, reason, whole"}},
		{name: "a policy's unknown key, for sage mcp", args: []string{"mcp", "--policy", policy, "--mode", "passthrough"}, code: 2,
			wants: []string{"rules[0].pattern: unknown key"}},
		{name: "a policy's unknown key, for sandboxd", args: []string{"sandboxd", "--workspace", sandboxtest.TempDir(t), "--policy", policy, "--mode", "passthrough"}, code: 2,
			wants: []string{"rules[0].pattern: unknown key"}},
		{name: "a missing policy file", args: []string{"agent", "--model", "scripted", "--policy", "/nonexistent/p.yaml", "--mode", "passthrough"}, code: 2,
			wants: []string{"--policy /nonexistent/p.yaml: open /nonexistent/p.yaml: no such file"}},
		{name: "a listen address that is no address", args: []string{"sandboxd", "--workspace", sandboxtest.TempDir(t), "--listen", "999.1.1.1:80"}, code: 2,
			wants: []string{`--listen 999.1.1.1:80: "999.1.1.1" is not an IPv4 address`, "such as 127.0.0.1"}},
		{name: "a port that is no port", args: []string{"provisioner", "--backend", "docker", "--listen", "127.0.0.1:99999"}, code: 2,
			wants: []string{`--listen 127.0.0.1:99999: port "99999": want a number from 0 to 65535`}},
		{name: "a listen address without a port", args: []string{"sandboxd", "--workspace", sandboxtest.TempDir(t), "--listen", "127.0.0.1"}, code: 2,
			wants: []string{`--listen "127.0.0.1": want HOST:PORT`}},
		{name: "stopping an unknown session", args: []string{"session", "stop", "nosuch"}, code: 1,
			wants: []string{"sage session stop: session nosuch is not running", "'sage session ls' lists the live ones"}},
		{name: "a task of a session not running", args: []string{"task", "status", "--session", "nosuch", "t-1"}, code: 1,
			wants: []string{"sage task status: session nosuch is not running, so it has no task t-1"}},
		{name: "a SAGE_HOME too deep for a session's socket", args: []string{"session", "stop", "s"},
			env: []string{"SAGE_HOME=/tmp/" + strings.Repeat("d", 90)}, code: 2,
			wants: []string{"SAGE_HOME=", "over the 103 a unix socket's path may have; fix: a shorter SAGE_HOME or session name"}},
		{name: "a task without an id", args: []string{"task", "kill"}, code: 2,
			wants: []string{"sage task kill: name one TASK"}},
		{name: "a minimal image without busybox", args: []string{"image", "build", "--minimal", "--binary", "/bin/busybox", "--busybox", "/nonexistent/busybox"}, code: 125,
			wants: []string{"/nonexistent/busybox", "fix: install a static busybox (Debian: apt-get install busybox-static), or name one with --busybox PATH"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.args[0] == "image" {
				testenv.Command(t, "/bin/busybox", testenv.SetupFix+" (apt-get install busybox-static)")
			}
			runBad(t, c)
		})
	}
}

// Exit codes agree with docs/cli.md's table for every verb: a timeout is
// 124 under --json too (its exit_code is the process's), sandbox rm of an
// unknown thread is 1, as session stop of an unknown session.
func TestExitCodesAgree(t *testing.T) {
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "exec", "--json", "--timeout", "1s", "--", "sleep 10")
	assert.Equal(t, exitTimedOut, r.code)
	var res struct {
		ExitCode int    `json:"exit_code"`
		TimedOut bool   `json:"timed_out"`
		Signal   string `json:"signal"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	assert.Equal(t, 124, res.ExitCode, "exit_code is the code sage exits with")
	assert.True(t, res.TimedOut)
	assert.NotEmpty(t, res.Signal, "the signal that ended it is still said")
	r = sage(t, home, "", "exec", "--json", "--", "exit 7")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, 7, res.ExitCode, "control: a command's own code")
	assert.Equal(t, 7, r.code)
}

// Every subcommand's help lists only the flags it takes.
func TestSubcommandFlagsAreTheirOwn(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"session", "ls", "--help"}, []string{"--json"}, []string{"--all", "--idle-timeout", "--trace"}},
		{[]string{"session", "stop", "--help"}, []string{"--all"}, []string{"--json", "--idle-timeout", "--trace"}},
		{[]string{"session", "serve", "--help"}, []string{"--idle-timeout", "--trace"}, []string{"--all", "--json"}},
		{[]string{"sandbox", "ls", "--help"}, []string{"--json", "--pool"}, []string{"--all", "--purge"}},
		{[]string{"sandbox", "rm", "--help"}, []string{"--all", "--purge"}, []string{"--json", "--pool"}},
		{[]string{"fs", "read", "--help"}, []string{"--session"}, []string{"--append", "--depth", "--json", "--max-entries"}},
		{[]string{"fs", "write", "--help"}, []string{"--append"}, []string{"--depth", "--json", "--max-entries"}},
		{[]string{"fs", "ls", "--help"}, []string{"--json", "--max-entries"}, []string{"--append", "--depth"}},
		{[]string{"fs", "tree", "--help"}, []string{"--json", "--depth", "--max-items", "--hidden", "--max-entries"}, []string{"--append"}},
		{[]string{"fs", "rm", "--help"}, []string{"--session"}, []string{"--append", "--depth", "--json"}},
		{[]string{"task", "output", "--help"}, []string{"--offset", "--follow", "--session"}, []string{"--force", "--json"}},
		{[]string{"task", "kill", "--help"}, []string{"--force"}, []string{"--offset", "--json"}},
	} {
		r := runInProcess(t, c.args...)
		require.Equal(t, 0, r.code, "%v", c.args)
		for _, w := range c.want {
			assert.Contains(t, r.stdout, "\n  "+w, "%v lists %s", c.args, w)
		}
		for _, n := range c.not {
			assert.NotContains(t, r.stdout, "\n  "+n+"\n", "%v does not take %s", c.args, n)
			assert.NotContains(t, r.stdout, "\n  "+n+" ", "%v does not take %s", c.args, n)
		}
	}
}
