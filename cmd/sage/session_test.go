//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// sessionHome is a SAGE_HOME whose session daemons are stopped at the
// end of the test, whatever happened.
func sessionHome(t *testing.T) string {
	t.Helper()
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home := sandboxtest.TempDir(t)
	t.Cleanup(func() { sage(t, home, "", "session", "stop", "--all") })
	return home
}

// inSession runs `sage exec --mode local --session name -- command`.
func inSession(t *testing.T, home, name, stdin string, command string, flags ...string) cliRun {
	t.Helper()
	args := append([]string{"exec", "--mode", "local", "--session", name}, flags...)
	return sage(t, home, stdin, append(args, "--", command)...)
}

type lsRow struct {
	Session     string `json:"session"`
	PID         int    `json:"pid"`
	MemoryBytes int64  `json:"memory_bytes"`
	Busy        int    `json:"busy"`
	AgeNS       int64  `json:"age_ns"`
}

func sessionLsJSON(t *testing.T, home string) []lsRow {
	t.Helper()
	r := sage(t, home, "", "session", "ls", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rows []lsRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows), r.stdout)
	return rows
}

// running lists the live (not zombie) processes whose command line
// contains every one of parts.
func running(parts ...string) []int { return testenv.Processes(parts...) }

// runningWith lists the live processes whose environment holds the
// variable kv (K=V): what a run started, whatever its command line.
func runningWith(kv string) []int {
	return liveProcesses(func(pid int) bool {
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return slices.Contains(strings.Split(string(env), "\x00"), kv)
	})
}

// liveProcesses lists the live (not zombie) processes, this one aside,
// that keep says to.
func liveProcesses(keep func(pid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !testenv.Alive(pid) {
			continue
		}
		if keep(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// assertNothingLeft checks that a stopped session left no process, no
// socket, no info and no lock behind, and kept its workspace.
func assertNothingLeft(t *testing.T, home, name string, daemonPID int, marks ...string) {
	t.Helper()
	dir := filepath.Join(home, "sessions", name, "daemon")
	for _, f := range []string{"sock", "info", "lock"} {
		_, err := os.Lstat(filepath.Join(dir, f))
		assert.True(t, os.IsNotExist(err), "%s left behind (%v)", f, err)
	}
	assert.Empty(t, running(filepath.Join(home, "sessions", name)), "a process of the session's sandbox is left")
	for _, m := range marks {
		assert.Empty(t, running(m), "a process %q is left", m)
	}
	if daemonPID > 0 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", daemonPID))
		if err == nil {
			i := strings.LastIndexByte(string(stat), ')')
			assert.True(t, strings.HasPrefix(string(stat[i+1:]), " Z"), "the daemon (pid %d) still runs", daemonPID)
		}
	}
}

// Two command lines reach one session sandbox: /tmp and a server kept;
// exit codes, stderr and stdin pass through; ls and stop; nothing left.
func TestSessionAcrossCommandLines(t *testing.T) {
	testenv.Command(t, "curl", testenv.SetupFix+" (apt-get install curl)")
	testenv.Command(t, "python3", testenv.SetupFix+" (apt-get install python3)")
	home := sessionHome(t)
	port := strconv.Itoa(20000 + os.Getpid()%20000)
	r := inSession(t, home, "two", "", "echo kept > /tmp/f; echo hello > index.txt; python3 -m http.server "+port+" --bind 127.0.0.1 >/dev/null 2>&1 &")
	require.Equal(t, 0, r.code, r.stderr)
	r = inSession(t, home, "two", "", "cat /tmp/f; for i in $(seq 100); do curl -sf 127.0.0.1:"+port+"/index.txt && exit 0; sleep 0.1; done; exit 1")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "kept\nhello\n", r.stdout, "the second command line sees the first one's /tmp and server")
	// Control: without --session each command line has a fresh sandbox.
	r = sage(t, home, "", "exec", "--mode", "local", "--", "cat /tmp/f")
	assert.NotEqual(t, 0, r.code, "control: a fresh sandbox has no /tmp/f")

	r = inSession(t, home, "two", "from stdin", "cat; echo oops >&2; exit 7")
	assert.Equal(t, 7, r.code)
	assert.Equal(t, "from stdin", r.stdout)
	assert.Equal(t, "oops\n", r.stderr)
	r = inSession(t, home, "two", "", "echo json", "--json")
	assert.Contains(t, r.stdout, `"stdout": "json\n"`)

	// A sleep of its own length, so another sleep on the machine is not taken for it.
	bgSleep := "sleep " + strconv.Itoa(300+os.Getpid()%1000)
	r = inSession(t, home, "two", "", "echo from-bg > bg.txt; "+bgSleep, "--background")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^bg-[0-9a-f]+\n$`, r.stdout)
	r = inSession(t, home, "two", "", "for i in $(seq 100); do cat bg.txt 2>/dev/null && exit 0; sleep 0.1; done; exit 1")
	assert.Equal(t, "from-bg\n", r.stdout, "the background task ran")

	rows := sessionLsJSON(t, home)
	require.Len(t, rows, 1)
	assert.Equal(t, "two", rows[0].Session)
	assert.Positive(t, rows[0].PID)
	assert.Positive(t, rows[0].MemoryBytes, "PSS of the session's processes")
	table := sage(t, home, "", "session", "ls")
	assert.Regexp(t, `(?m)^two\s+`+strconv.Itoa(rows[0].PID)+`\s+\S+\s+\S+\s+[0-9.]+ MiB`, table.stdout)
	require.NotEmpty(t, running("http.server", port), "the server runs before stop")

	r = sage(t, home, "", "session", "stop", "two")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stopped two\n", r.stdout)
	assertNothingLeft(t, home, "two", rows[0].PID, "http.server "+port, bgSleep)
	assert.Empty(t, sessionLsJSON(t, home))
	b, err := os.ReadFile(filepath.Join(home, "sessions/two/workspace/index.txt"))
	assert.NoError(t, err, "the workspace is kept")
	assert.Equal(t, "hello\n", string(b))
	r = sage(t, home, "", "session", "stop", "two")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "sage session stop: session two is not running ('sage session ls' lists the live ones)\n", r.stderr)
}

// A daemon killed with SIGKILL is found dead on the next call and
// replaced, with one line on stderr.
func TestSessionCrashedDaemonIsReplaced(t *testing.T) {
	home := sessionHome(t)
	r := inSession(t, home, "crash", "", "echo old > /tmp/f")
	require.Equal(t, 0, r.code, r.stderr)
	rows := sessionLsJSON(t, home)
	require.Len(t, rows, 1)
	old := rows[0].PID
	require.NoError(t, syscall.Kill(old, syscall.SIGKILL))
	r = inSession(t, home, "crash", "", "cat /tmp/f 2>/dev/null || echo fresh")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "fresh\n", r.stdout)
	assert.Regexp(t, `^sage: session crash: its daemon \(pid `+strconv.Itoa(old)+`\) died; starting a new one .*\n$`, r.stderr)
	rows = sessionLsJSON(t, home)
	require.Len(t, rows, 1)
	assert.NotEqual(t, old, rows[0].PID)
	r = inSession(t, home, "crash", "", "true")
	assert.Empty(t, r.stderr, "only the call that replaced it says so")
}

// Command lines started at the same moment end up in one daemon.
func TestSessionConcurrentStart(t *testing.T) {
	home := sessionHome(t)
	const n = 4
	out := make([]cliRun, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = inSession(t, home, "conc", "", "mkdir /tmp/m 2>/dev/null && echo first || echo later")
		}()
	}
	wg.Wait()
	firsts := 0
	for _, r := range out {
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Empty(t, r.stderr)
		firsts += strings.Count(r.stdout, "first")
	}
	assert.Equal(t, 1, firsts, "one sandbox saw every command: %v", out)
	assert.Len(t, sessionLsJSON(t, home), 1)
	assert.Len(t, running(sageBin, "session serve", "conc"), 1, "one daemon")
}

// The idle timeout ends the daemon and everything in it; a later call's
// --idle-timeout replaces the one the daemon started with.
func TestSessionIdleTimeout(t *testing.T) {
	home := sessionHome(t)
	r := inSession(t, home, "idle", "", "true", "--idle-timeout", "0")
	require.Equal(t, 0, r.code, r.stderr)
	rows := sessionLsJSON(t, home)
	require.Len(t, rows, 1)
	r = inSession(t, home, "idle", "", "sleep 301 >/dev/null 2>&1 &", "--idle-timeout", "1s")
	require.Equal(t, 0, r.code, r.stderr)
	deadline := time.Now().Add(60 * time.Second)
	for len(sessionLsJSON(t, home)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	require.Empty(t, sessionLsJSON(t, home), "the idle daemon ended")
	assertNothingLeft(t, home, "idle", rows[0].PID, "sleep 301")
}

func TestSessionBadInput(t *testing.T) {
	home := sessionHome(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--mode", "local", "--session", "../x", "--", "true"}, `--session "../x"`},
		{[]string{"exec", "--mode", "local", "--session", "a/b", "--", "true"}, `--session "a/b"`},
		{[]string{"exec", "--mode", "local", "--session", strings.Repeat("x", 65), "--", "true"}, "1-64 characters"},
		{[]string{"exec", "--mode", "local", "--background", "--", "true"}, "--background and --idle-timeout need --session"},
		{[]string{"exec", "--mode", "local", "--session", "s", "--idle-timeout", "soon", "--", "true"}, "--idle-timeout"},
		{[]string{"session", "stop", "../x"}, `session name "../x"`},
		{[]string{"session", "stop"}, "name the SESSIONs to stop, or --all"},
	} {
		r := sage(t, home, "", c.args...)
		assert.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, c.args)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}
	_, err := os.Stat(filepath.Join(home, "sessions", "..", "x"))
	assert.True(t, os.IsNotExist(err), "nothing made for a bad name")
}

// A session started with other settings refuses the command instead of
// running it under the wrong limits.
func TestSessionSettingsMismatch(t *testing.T) {
	home := sessionHome(t)
	r := inSession(t, home, "set", "", "true", "--pids", "100")
	require.Equal(t, 0, r.code, r.stderr)
	r = inSession(t, home, "set", "", "echo ran", "--pids", "200")
	assert.Equal(t, 2, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "sage: session set runs with other settings: --pids is 100 in the session, 200 in this call; "+
		"fix: sage session stop set, or give the settings it was started with\n", r.stderr, "names which settings differ")
	r = inSession(t, home, "set", "", "echo ran", "--pids", "100", "--timeout", "10s", "--env", "A=1")
	assert.Equal(t, "ran\n", r.stdout, "control: per-command flags are not settings: %s", r.stderr)
}
