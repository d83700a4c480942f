package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// runInProcess runs the CLI in this process. The deadline is short so a
// command that wrongly starts working instead of printing help fails.
func runInProcess(t *testing.T, args ...string) cliRun {
	t.Helper()
	t.Setenv("SAGE_HOME", sandboxtest.TempDir(t))
	var out, errb testenv.Buffer
	code := runWithin(t, 20*time.Second, &cliEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}, args...)
	return cliRun{out.String(), errb.String(), code}
}

// runWithin runs the CLI in this process, as the sage helper runs the
// binary: under a deadline, at which its context is cancelled (SIGTERM's
// part); not ending by then fails the test, and not ending termGrace
// after it stops it.
func runWithin(t *testing.T, deadline time.Duration, env *cliEnv, args ...string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, env, args) }()
	select {
	case code := <-done:
		return code
	case <-time.After(deadline):
	}
	cancel()
	t.Errorf("sage %v did not end within %v: cancelled", args, deadline)
	select {
	case code := <-done:
		return code
	case <-time.After(termGrace):
		t.Fatalf("sage %v did not end within %v of being cancelled", args, termGrace)
		return -1
	}
}

// helpForms are the ways to ask for the help of a command line.
func helpForms(cmd string, sub string) [][]string {
	if sub == "" {
		return [][]string{{cmd, "-h"}, {cmd, "--help"}, {cmd, "-help"}, {"help", cmd}}
	}
	return [][]string{{cmd, sub, "-h"}, {cmd, sub, "--help"}, {"help", cmd, sub}, {cmd, "help", sub}}
}

// TestHelpForEveryCommand walks the command table, so a new command or
// subcommand gets the same checks: help on stdout, nothing on stderr,
// exit 0, in every spelling.
func TestHelpForEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"help", "help"}} {
		r := runInProcess(t, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		assert.Empty(t, r.stderr, "%v", args)
		for _, c := range commands {
			assert.Contains(t, r.stdout, "\n  "+c.name+" ", "%v lists %s", args, c.name)
		}
	}
	require.NotEmpty(t, commands)
	for _, c := range commands {
		for _, args := range helpForms(c.name, "") {
			r := runInProcess(t, args...)
			assert.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
			assert.Empty(t, r.stderr, "%v", args)
			assert.True(t, strings.HasPrefix(r.stdout, "usage: sage "+c.name), "%v: %q", args, r.stdout)
			assert.Contains(t, r.stdout, c.summary, "%v", args)
			for _, s := range c.subs {
				assert.Contains(t, r.stdout, "\n  "+s.name+" ", "%v lists %s", args, s.name)
			}
		}
		for _, s := range c.subs {
			for _, args := range helpForms(c.name, s.name) {
				r := runInProcess(t, args...)
				assert.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
				assert.Empty(t, r.stderr, "%v", args)
				assert.True(t, strings.HasPrefix(r.stdout, "usage: sage "+c.name+" "+s.name), "%v: %q", args, r.stdout)
				assert.Contains(t, r.stdout, s.summary, "%v", args)
			}
		}
	}
}

// TestBadInputIsOneLine: an unknown flag, command or subcommand gets one
// line naming it and pointing at the help, and exit 2; nothing on stdout.
func TestBadInputIsOneLine(t *testing.T) {
	check := func(want string, args ...string) {
		t.Helper()
		r := runInProcess(t, args...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
		assert.Empty(t, r.stdout, "%v", args)
		assert.Equal(t, want, r.stderr, "%v", args)
	}
	for _, c := range commands {
		line := "sage " + c.name
		args := []string{c.name}
		if c.subs != nil {
			check(line+": missing subcommand ("+subNames(c.subs)+"); see '"+line+" --help'\n", args...)
			check(line+`: unknown subcommand "bogus" (want `+subNames(c.subs)+"); see '"+line+" --help'\n", c.name, "bogus")
			line += " " + c.subs[0].name
			args = append(args, c.subs[0].name)
		}
		check(line+": unknown flag --no-such-flag; see '"+line+" --help'\n", append(args, "--no-such-flag")...)
	}
	check("sage: unknown command \"nope\"; see 'sage --help'\n", "nope")
	check("sage help: unknown command \"nope\"; see 'sage help --help'\n", "help", "nope")
	check("sage: unknown flag --json (flags go after the command); see 'sage --help'\n", "--json", "exec")
	check("sage exec: flag --timeout needs a value; see 'sage exec --help'\n", "exec", "--timeout")
	check("sage exec: invalid value \"soon\" for --timeout: want a duration such as 30s, 5m or 1h30m; see 'sage exec --help'\n", "exec", "--timeout", "soon", "true")
	check("sage exec: missing the command to run; see 'sage exec --help'\n", "exec")
	check("sage version: unexpected argument \"x\"; see 'sage version --help'\n", "version", "x")
}

func TestFlagHelpListsFlagsWithoutSecrets(t *testing.T) {
	t.Setenv("SAGE_SANDBOXD_TOKEN", "s3cret-token")
	r := runInProcess(t, "sandboxd", "--help")
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "\n  --token ")
	assert.NotContains(t, r.stdout, "s3cret-token", "a default read from the environment is not printed")
	r = runInProcess(t, "exec", "--help")
	assert.Contains(t, r.stdout, "\n  --mount host:sandbox[:ro]\n      extra mount host:sandbox[:ro] (repeatable)\n")
	assert.Contains(t, r.stdout, "\n  --session id\n      session id: names the sandbox and its default workspace (default default)\n")
	assert.Contains(t, r.stdout, "\n  --json\n")
}

func TestWriteVersion(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/sage-go/sage", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-30T15:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	var b bytes.Buffer
	writeVersion(&b, info)
	lines := strings.Split(b.String(), "\n")
	require.Len(t, lines, 6, b.String())
	assert.True(t, strings.HasPrefix(lines[0], "sage (devel)+0123456789ab (go"), lines[0])
	assert.Equal(t, []string{"module:   github.com/sage-go/sage (devel)",
		"revision: 0123456789abcdef0123456789abcdef01234567", "time:     2026-11-30T15:00:00Z", "modified: true", ""}, lines[1:])

	info.Main.Version = "v0.3.0"
	assert.Equal(t, "v0.3.0", versionOf(info), "a release version names itself")
	assert.Equal(t, "unknown", versionOf(nil))
}

func TestSlowStepNotice(t *testing.T) {
	var w testenv.Buffer
	onSetup := slowStepNotice(&w, 200*time.Millisecond)
	onSetup("quick step")()
	time.Sleep(400 * time.Millisecond)
	assert.Empty(t, w.String(), "a step over before the delay says nothing")

	done := onSetup("slow step")
	time.Sleep(time.Second)
	done()
	assert.Equal(t, "sage: slow step...\n", w.String())
	done()
	assert.Equal(t, "sage: slow step...\n", w.String(), "said once")

	var none sandbox.PythonOptions
	none.Step("no callback")() // no OnSetup: Step is a no-op
}

// TestPythonFirstVenvSaysSo: a first Python call without requirements
// needs no venv and says nothing; the first with requirements creates
// the venv for real (local mode) and says so on stderr, never in the
// --json output; the next, with the venv in place, says nothing.
func TestPythonFirstVenvSaysSo(t *testing.T) {
	for _, tool := range []string{"bwrap", "python3"} {
		testenv.Command(t, tool, testenv.SetupFix)
	}
	const notice = "sage: creating the session's Python environment...\n"
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "python", "--mode", "local", "-c", "import sys; print(6 * 7, sys.prefix == sys.base_prefix)")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "42 True\n", r.stdout, "the host's python3, no venv")
	assert.Empty(t, r.stderr, "no venv to make: nothing to say")

	r = sage(t, home, "", "python", "--mode", "local", "--json", "--requirements", "pip", "-c", "print(6 * 7)")
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, notice), "creating a venv takes seconds: %q", r.stderr)
	var res sandbox.CommandResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "stdout is the JSON alone: %q", r.stdout)
	assert.Equal(t, "42\n", res.Stdout)

	r = sage(t, home, "", "python", "--mode", "local", "-c", "import sys; print(6 * 7, sys.prefix == sys.base_prefix)")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "42 False\n", r.stdout, "the venv, once made, runs every call")
	assert.Empty(t, r.stderr, "the venv exists: nothing to say")
}

func TestFlagError(t *testing.T) {
	for in, want := range map[string]string{
		"flag provided but not defined: -foo":          "unknown flag --foo",
		"flag needs an argument: -timeout":             "flag --timeout needs a value",
		`invalid value "x" for flag -memory: bad`:      `invalid value "x" for --memory: bad`,
		`invalid boolean value "x" for -json: invalid`: `invalid boolean value "x" for --json: invalid`,
		"bad flag syntax: ---x":                        "bad flag syntax: ---x",
		"flag needs an argument: -c":                   "flag -c needs a value",
		"flag provided but not defined: -x":            "unknown flag -x",
	} {
		assert.Equal(t, want, flagError(errors.New(in)))
	}
}
