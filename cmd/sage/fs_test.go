package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func assertNoControl(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && r != '\t' && !unicode.IsPrint(r) {
			t.Fatalf("raw control character %U in output %q", r, out)
		}
	}
}

// TestFSNamesAreEscaped: names made inside the sandbox with escape
// sequences, carriage returns, newlines, bells, invalid UTF-8 and other
// controls are printed escaped by ls and tree; plain names unchanged.
func TestFSNamesAreEscaped(t *testing.T) {
	home, ws := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	names := []string{"\x1b[2Jclear", "ret\rurn", "new\nline", "bell\x07", "bad\xff", "ctl\x01"}
	for _, n := range append(names, "plain.txt") {
		require.NoError(t, os.WriteFile(filepath.Join(ws, n), nil, 0o644))
	}
	r := sage(t, home, "", "fs", "ls", "--workspace", ws, ".")
	require.Equal(t, 0, r.code, r.stderr)
	assertNoControl(t, r.stdout)
	assert.NotContains(t, r.stdout, "\xff")
	assert.Contains(t, r.stdout, "  plain.txt\n", "control: plain names print unchanged")
	assert.Contains(t, r.stdout, `$'\033''[2Jclear'`)
	assert.Contains(t, r.stdout, `'ret'$'\r''urn'`)
	assert.Contains(t, r.stdout, `'new'$'\n''line'`)
	assert.Equal(t, len(names)+1, strings.Count(r.stdout, "\n"), "one line per entry")

	r = sage(t, home, "", "fs", "tree", "--workspace", ws, ".")
	require.Equal(t, 0, r.code, r.stderr)
	assertNoControl(t, r.stdout)
	assert.Contains(t, r.stdout, "\n  plain.txt\n")
	assert.Contains(t, r.stdout, `'bell'$'\a'`)
	assert.Equal(t, len(names)+2, strings.Count(r.stdout, "\n"), "one line per entry")

	r = sage(t, home, "", "fs", "read", "--workspace", ws, "missing\x1b[2J")
	assert.Equal(t, 1, r.code)
	assertNoControl(t, r.stderr)
}

// TestFSLsIsBounded lists 300k entries: sage stops at --max-entries, says
// so, and stays small (it took 695 MB before); the control lists a small
// directory whole.
func TestFSLsIsBounded(t *testing.T) {
	home := sandboxtest.TempDir(t)
	ws := sandboxtest.TempDir(t)
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) == nil && st.Type == 0x01021994 { // tmpfs: entries are cheap to make
		d, err := os.MkdirTemp("/dev/shm", "sage-cli-test-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(d) })
		ws = d
	}
	require.NoError(t, os.Mkdir(filepath.Join(ws, "big"), 0o755))
	start := time.Now()
	testenv.MakeEntries(t, filepath.Join(ws, "big"), 300000)
	t.Logf("made 300k entries in %v", time.Since(start))

	// The heap is read from the runtime's GC trace: the child's max RSS
	// is useless here (Linux carries the forking test process's over).
	cmd := exec.Command(sageBin, "fs", "ls", "--workspace", ws, "--max-entries", "5000", "big")
	cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "SAGE_SANDBOX_MODE=passthrough", "GODEBUG=gctrace=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer watchdog(t, cmd)()
	lines := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines++
	}
	require.NoError(t, cmd.Wait(), errb.String())
	assert.Equal(t, 5000, lines)
	assert.Contains(t, errb.String(), "sage fs ls: truncated")
	peak := 0
	for _, m := range regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`).FindAllStringSubmatch(errb.String(), -1) {
		for _, v := range m[1:] {
			n, _ := strconv.Atoi(v)
			peak = max(peak, n)
		}
	}
	t.Logf("peak heap %d MB", peak)
	assert.Less(t, peak, 64, "sage fs ls held %d MB of heap for 5000 entries", peak)

	require.NoError(t, os.Mkdir(filepath.Join(ws, "small"), 0o755))
	testenv.MakeEntries(t, filepath.Join(ws, "small"), 20)
	r := sage(t, home, "", "fs", "ls", "--workspace", ws, "--max-entries", "5000", "small")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 20, strings.Count(r.stdout, "\n"))
	assert.NotContains(t, r.stderr, "truncated", "control: a small directory is whole")
}

// TestSandboxdTokenReachesExec: a default sandboxd requires the token it
// saved under SAGE_HOME; `sage exec --mode remote` with the same
// SAGE_HOME finds it, with another home it is refused.
func TestSandboxdTokenReachesExec(t *testing.T) {
	home := sandboxtest.TempDir(t)
	t.Setenv("SAGE_SANDBOXD_TOKEN", "") // the saved token, not one from the environment
	url, logs := startSandboxdLogs(t, home, "--mode", "passthrough", "--workspace", sandboxtest.TempDir(t))
	tok, err := os.ReadFile(filepath.Join(home, "sandboxd", "token"))
	require.NoError(t, err)
	// stderr is copied by its own goroutine: the line may land after the
	// "listening" line on stdout.
	assert.Eventually(t, func() bool { return strings.Contains(logs.String(), strings.TrimSpace(string(tok))) },
		5*time.Second, 10*time.Millisecond, "the token is printed once on stderr: %q", logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), strings.TrimSpace(string(tok))), "printed once")

	remote := func(home string) cliRun {
		cmd := exec.Command(sageBin, "exec", "--mode", "remote", "--", "echo hi")
		cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "SAGE_REMOTE_PROVIDER=aio", "SAGE_REMOTE_URL="+url, "SAGE_REMOTE_API_KEY=")
		return runCmd(t, cmd)
	}
	var r cliRun
	require.Eventually(t, func() bool { r = remote(home); return r.code == 0 }, 20*time.Second, 100*time.Millisecond,
		"remote exec with the saved token never worked: %+v\nsandboxd log:\n%s", r, logs.String())
	assert.Equal(t, "hi\n", r.stdout)
	r = remote(sandboxtest.TempDir(t))
	assert.NotEqual(t, 0, r.code, "a client without the token is refused")
	assert.Contains(t, r.stderr, "401")
}
