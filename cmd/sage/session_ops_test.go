//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/pyindex"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// sessionCmd runs `sage SUB... --mode local --session name ARGS...`.
func sessionCmd(t *testing.T, home, name, stdin string, sub []string, args ...string) cliRun {
	t.Helper()
	full := append(append(append([]string{}, sub...), "--mode", "local", "--session", name), args...)
	return sage(t, home, stdin, full...)
}

// sage python --session runs in the session's sandbox: /tmp shared with
// sage exec --session, exit status and streams as exec's, stdin and
// FILE, and a package pip-installed by one call importable by the next.
func TestSessionPython(t *testing.T) {
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3)")
	home := sessionHome(t)
	py := []string{"python"}
	r := sessionCmd(t, home, "py", "", py, "-c", `open("/tmp/x","w").write("1")`)
	require.Equal(t, 0, r.code, r.stderr)
	r = inSession(t, home, "py", "", "cat /tmp/x")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "1", r.stdout, "sage exec --session sees the /tmp of sage python --session")
	// Control: Python in a fresh sandbox has no /tmp/x.
	r = sage(t, home, "", "python", "--mode", "local", "-c", `open("/tmp/x")`)
	assert.NotEqual(t, 0, r.code, "control: a fresh sandbox has its own /tmp")

	r = inSession(t, home, "py", "", "sleep 303 >/dev/null 2>&1 &")
	require.Equal(t, 0, r.code, r.stderr)
	r = sessionCmd(t, home, "py", "", py, "-c", `import os
print(any(b"sleep\x00303" in open(f"/proc/{p}/cmdline","rb").read() for p in os.listdir("/proc") if p.isdigit()))`)
	assert.Equal(t, "True\n", r.stdout, "Python sees the session's processes: %s", r.stderr)

	r = sessionCmd(t, home, "py", "in", py, "-c", `import sys; print(sys.stdin.read()); print("err", file=sys.stderr); sys.exit(3)`)
	assert.Equal(t, 3, r.code)
	assert.Equal(t, "in\n", r.stdout)
	assert.Equal(t, "err\n", r.stderr)
	r = sessionCmd(t, home, "py", "", py, "--json", "-c", `print("j")`)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"stdout": "j\n"`)
	r = sessionCmd(t, home, "py", "", py, "--timeout", "1s", "-c", `import time; time.sleep(30)`)
	assert.Equal(t, 124, r.code, r.stderr)
	assert.Contains(t, r.stderr, "timed out after 1s")

	file := filepath.Join(sandboxtest.TempDir(t), "prog.py")
	require.NoError(t, os.WriteFile(file, []byte(`print(open("/tmp/x").read() + "2")`), 0o644))
	r = sessionCmd(t, home, "py", "", py, file)
	assert.Equal(t, "12\n", r.stdout, r.stderr)

	wheels := sandboxtest.TempDir(t)
	require.NoError(t, os.Chmod(wheels, 0o755))
	name, whl, err := pyindex.Wheel("sesshello", "0.1", `GREETING = "hello through the session"`)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wheels, name), whl, 0o644))
	r = sessionCmd(t, home, "py", "", py, "--env", "PIP_FIND_LINKS="+wheels, "--env", "PIP_NO_INDEX=1",
		"--requirements", "sesshello==0.1", "-c", "import sesshello; print(sesshello.GREETING)")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "hello through the session\n", r.stdout)
	r = sessionCmd(t, home, "py", "", py, "-c", "import sesshello; print(sesshello.GREETING)")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "hello through the session\n", r.stdout, "the next call imports what the last one installed")
	r = inSession(t, home, "py", "", "python -c 'import sesshello'")
	assert.Equal(t, 0, r.code, "sage exec --session uses the same venv: %s", r.stderr)

	rows := sessionLsJSON(t, home)
	require.Len(t, rows, 1, "one daemon served python and exec")
	assert.Len(t, running(sageBin, "session serve", "py"), 1)

	r = sessionCmd(t, home, "py", "", py, "--pids", "77", "-c", "print(1)")
	assert.Equal(t, 2, r.code, "another setting than the running session's is refused")
	assert.Contains(t, r.stderr, "sage session stop py")
	assert.Empty(t, r.stdout)
}

// sage fs --session works on the session's sandbox: what its commands
// write, it reads, and the reverse; errors exit and read as without
// --session; /tmp is the commands' only, and says so.
func TestSessionFS(t *testing.T) {
	home := sessionHome(t)
	fsCmd := func(stdin, op string, args ...string) cliRun {
		t.Helper()
		return sessionCmd(t, home, "files", stdin, []string{"fs", op}, args...)
	}
	r := inSession(t, home, "files", "", "mkdir -p sub && printf from-exec > sub/e.txt && echo tmp > /tmp/t", "--pids", "100")
	require.Equal(t, 0, r.code, r.stderr)
	r = fsCmd("", "read", "--pids", "100", "sub/e.txt")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "from-exec", r.stdout)
	r = fsCmd("from-fs", "write", "--pids", "100", "sub/w.txt")
	require.Equal(t, 0, r.code, r.stderr)
	r = fsCmd("+more", "write", "--pids", "100", "--append", "sub/w.txt")
	require.Equal(t, 0, r.code, r.stderr)
	r = inSession(t, home, "files", "", "cat sub/w.txt", "--pids", "100")
	assert.Equal(t, "from-fs+more", r.stdout, r.stderr)
	r = fsCmd("", "ls", "--pids", "100", "sub")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^-rw\S*\s+9\s+.*e\.txt\n.*w\.txt\n$`, r.stdout)
	r = fsCmd("", "ls", "--pids", "100", "--max-entries", "1", "sub")
	assert.Equal(t, 1, strings.Count(r.stdout, "\n"), r.stdout)
	assert.Contains(t, r.stderr, "truncated: listed 1 entries")
	r = fsCmd("", "tree", "--pids", "100", ".")
	assert.Equal(t, "workspace/\n  sub/\n    e.txt\n    w.txt\n", r.stdout, r.stderr)
	r = fsCmd("", "rm", "--pids", "100", "sub/e.txt")
	assert.Equal(t, 0, r.code, r.stderr)
	r = inSession(t, home, "files", "", "test -e sub/e.txt || echo gone", "--pids", "100")
	assert.Equal(t, "gone\n", r.stdout)

	// Errors: the exit code and the line of sage fs without --session.
	for _, c := range []struct{ op, path string }{{"read", "missing.txt"}, {"ls", "nodir"}, {"rm", "missing"},
		{"read", "../../../etc/passwd"}, {"read", "/etc/passwd"}} {
		r := fsCmd("", c.op, "--pids", "100", c.path)
		plain := sage(t, home, "", "fs", c.op, "--mode", "local", "--pids", "100", c.path)
		assert.Equal(t, 1, plain.code, plain.stderr)
		assert.Equal(t, plain.code, r.code, "%v: %s", c, r.stderr)
		assert.Equal(t, plain.stderr, r.stderr, "%v", c)
		assert.Empty(t, r.stdout)
	}
	r = fsCmd("", "read", "--pids", "100", "/tmp/t")
	plain := sage(t, home, "", "fs", "read", "--mode", "local", "--pids", "100", "/tmp/t")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, strings.TrimSuffix(plain.stderr, "\n")), "%q\n%q", r.stderr, plain.stderr)
	assert.Contains(t, r.stderr, "the session's /tmp is seen by its commands only: sage exec --session files -- cat /tmp/t")

	// Through the daemon: a session started with other settings refuses
	// the operation, as it refuses a command (sage fs opened its own
	// sandbox before, and read on).
	r = fsCmd("", "read", "--pids", "200", "sub/w.txt")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "sage session stop files")
	require.Len(t, sessionLsJSON(t, home), 1)

	// sage fs alone starts the session's daemon.
	r = sessionCmd(t, home, "fsonly", "x", []string{"fs", "write"}, "f")
	require.Equal(t, 0, r.code, r.stderr)
	rows := sessionLsJSON(t, home)
	require.Len(t, rows, 2)
	assert.Equal(t, "fsonly", rows[1].Session)

	r = sage(t, home, "", "fs", "read", "--mode", "local", "--idle-timeout", "1m", "f")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--idle-timeout needs --session")
}

// A session's commands show up in an OTLP receiver as a command line
// without a session does: a span per command line, named after it (no
// GenAI operation), holding its sandbox spans; the daemon's start
// (acquire) and stop (release) are spans of their own.
func TestSessionTracesOTLP(t *testing.T) {
	home := sessionHome(t)
	rcv := startOTLPReceiver(t)
	spans := func() map[string]int {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		m := map[string]int{}
		for k, v := range rcv.spans {
			m[k] = v
		}
		return m
	}
	waitFor := func(want map[string]int) map[string]int {
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, all := spans(), true
			for k, n := range want {
				all = all && got[k] >= n
			}
			if all || time.Now().After(deadline) {
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Control: a command line without a session.
	r := sage(t, home, "", "exec", "--mode", "local", "--", "true")
	require.Equal(t, 0, r.code, r.stderr)
	plain := waitFor(map[string]int{"sage exec": 1, "sandbox.exec": 1})
	for _, name := range []string{"sage exec", "sandbox.acquire", "sandbox.exec", "sandbox.release"} {
		assert.Equal(t, 1, plain[name], "control, %s: %v", name, plain)
	}

	for range 2 {
		r = inSession(t, home, "traced", "", "true")
		require.Equal(t, 0, r.code, r.stderr)
	}
	r = sessionCmd(t, home, "traced", "", []string{"fs", "read"}, "missing")
	require.Equal(t, 1, r.code, r.stderr)
	r = sage(t, home, "", "session", "stop", "traced")
	require.Equal(t, 0, r.code, r.stderr)
	want := map[string]int{"sage exec": 3, "sandbox.exec": 3, "sage fs read": 1,
		"sandbox.read_file": 1, "sage session serve": 1, "sandbox.acquire": 2,
		"sage session stop": 1, "sandbox.release": 2}
	got := waitFor(want)
	for name, n := range want {
		assert.Equal(t, n, got[name], "%s: %v", name, got)
	}
}
