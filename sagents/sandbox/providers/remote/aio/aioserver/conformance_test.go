package aioserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
)

// Conformance with what the AIO SDKs (agent_sandbox 0.0.31, Go and JS)
// and DeerFlow's AioSandbox send (issue #13). Each request below is the
// JSON body those clients send for the named call; every request and
// answer goes through the OpenAPI validator of the fixture.

func data(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	require.Equal(t, true, m["success"], "answer: %v", m)
	d, ok := m["data"].(map[string]any)
	require.True(t, ok, "data is an object: %v", m)
	return d
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	sort.Strings(out)
	return out
}

func (f *fixture) touch(names ...string) {
	f.t.Helper()
	for _, n := range names {
		p := filepath.Join(f.ws, filepath.FromSlash(n))
		require.NoError(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(f.t, os.WriteFile(p, []byte(n+"\n"), 0o644))
	}
}

// Item 2: DeerFlow's glob tool passes `**/*.py` through
// client.file.find_files(path=..., glob=...).
func TestFindRecursiveGlob_DeerFlowGlobTool(t *testing.T) {
	f := newFixture(t, nil)
	f.touch("top.txt", "d/one.txt", "d/e/two.txt", "d/e/f/three.txt", "d/skip.py")
	find := func(glob string) []string {
		st, m := f.post("/v1/file/find", `{"path":"`+f.ws+`","glob":"`+glob+`"}`)
		require.Equal(t, http.StatusOK, st)
		return strs(data(t, m)["files"])
	}
	all := []string{f.ws + "/d/e/f/three.txt", f.ws + "/d/e/two.txt", f.ws + "/d/one.txt", f.ws + "/top.txt"}
	assert.Equal(t, all, find("**/*.txt"), "** matches zero or more directories")
	assert.Equal(t, all[:3], find("d/**/*.txt"), "d/** includes d itself")
	assert.Equal(t, []string{f.ws + "/d/e/two.txt"}, find("d/*/*.txt"), "control: * does not cross /")
	assert.Equal(t, []string{f.ws + "/d/skip.py"}, find("**/*.py"))
	st, m := f.post("/v1/file/find", `{"path":"`+f.ws+`","glob":"[a-"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, st, "a bad glob is 422: %v", m)
}

// Item 7: client.file.glob_files(path=..., pattern="**/*.txt").
func TestFileGlob_SDKGlobFiles(t *testing.T) {
	f := newFixture(t, nil)
	f.touch("a.txt", "d/b.txt", ".hidden/c.txt", "d/.h.txt", "build/x.txt")
	st, m := f.post("/v1/file/glob", `{"path":"`+f.ws+`","pattern":"**/*.txt","exclude":["build"]}`)
	require.Equal(t, http.StatusOK, st)
	d := data(t, m)
	var got []string
	for _, e := range d["files"].([]any) {
		fi := e.(map[string]any)
		got = append(got, fi["path"].(string))
		assert.NotNil(t, fi["size"], "metadata by default")
	}
	assert.Equal(t, []string{f.ws + "/a.txt", f.ws + "/d/b.txt"}, got, "hidden names and excluded directories are skipped, sorted by path")
	st, m = f.post("/v1/file/glob", `{"path":"`+f.ws+`","pattern":"**/*.txt","include_hidden":true,"max_results":2,"include_metadata":false}`)
	require.Equal(t, http.StatusOK, st)
	d = data(t, m)
	assert.EqualValues(t, 5, d["total_count"], "control: with hidden names every .txt counts")
	assert.Equal(t, true, d["truncated"])
	assert.Len(t, d["files"], 2)
	assert.Nil(t, d["files"].([]any)[0].(map[string]any)["size"])
}

// Item 3: DeerFlow's execute_command is client.shell.exec_command(
// command=..., id=session) on one session; the session is one shell.
// The default is one long-lived bash per session: unexported variables
// and functions last too; the replay fallback keeps exports only.
func TestShellSessionKeepsState_DeerFlowExecuteCommand(t *testing.T) {
	t.Run("live", func(t *testing.T) { testShellState(t, nil, "Y=unexported fn") })
	t.Run("replay", func(t *testing.T) { testShellState(t, aioserver.NewReplayShell, "Y= ") })
}

func testShellState(t *testing.T, factory aioserver.ShellFactory, kept string) {
	f := newFixture(t, func(o *aioserver.Options) { o.NewShell = factory })
	sub := filepath.Join(f.ws, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	exec := func(id, cmd string) map[string]any {
		t.Helper()
		body := `{"command":` + quote(cmd) + `}`
		if id != "" {
			body = `{"id":"` + id + `","command":` + quote(cmd) + `}`
		}
		st, m := f.post("/v1/shell/exec", body)
		require.Equal(t, http.StatusOK, st, "%v", m)
		return data(t, m)
	}
	exec("s1", "cd sub && export X=1 && Y=unexported; fn() { echo fn; }")
	d := exec("s1", `pwd; echo "X=$X Y=$Y $(fn 2>/dev/null)"`)
	assert.Equal(t, sub+"\nX=1 "+kept+"\n", d["output"], "cwd and exported variables carry over")
	exec("s1", "cd .. ; export Z=2; exit 3")
	d = exec("s1", `pwd; echo "$X$Z"`)
	assert.Equal(t, f.ws+"\n12\n", d["output"], "state is kept when the command exits with a status")
	d = exec("s2", `pwd; echo "X=$X"`)
	assert.Equal(t, f.ws+"\nX=\n", d["output"], "control: another session starts fresh")
	d = exec("s1", "echo out1; echo err1 >&2; echo out2")
	assert.Equal(t, "out1\nerr1\nout2\n", d["output"], "stdout and stderr interleave as written")
	assert.EqualValues(t, 0, d["exit_code"])

	// The session id of an exec that sent none is registered (item 6).
	d = exec("", "cd sub; export W=9")
	sid := d["session_id"].(string)
	d = exec(sid, `pwd; echo $W`)
	assert.Equal(t, sub+"\n9\n", d["output"])
	st, m := f.do(http.MethodGet, "/v1/shell/sessions", "", nil)
	require.Equal(t, http.StatusOK, st)
	sessions := data(t, m)["sessions"].(map[string]any)
	require.Contains(t, sessions, sid)
	assert.Equal(t, sub, sessions[sid].(map[string]any)["working_dir"])
}

// Items 3 and 7: exec_command(timeout=...) answers running; view, wait,
// write and kill reach the command later.
func TestShellTimeoutViewWaitWriteKill_SDKShellCalls(t *testing.T) {
	f := newFixture(t, nil)
	start := time.Now()
	st, m := f.post("/v1/shell/exec", `{"id":"w","command":"echo ready; read line; echo got $line; sleep 0.3","timeout":0.5}`)
	require.Equal(t, http.StatusOK, st)
	d := data(t, m)
	assert.Equal(t, "running", d["status"])
	assert.Nil(t, d["exit_code"])
	assert.Less(t, time.Since(start), 5*time.Second)
	st, m = f.post("/v1/shell/view", `{"id":"w"}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "ready\n", data(t, m)["output"], "output so far")
	st, m = f.post("/v1/shell/write", `{"id":"w","input":"hello","press_enter":true}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	st, m = f.post("/v1/shell/wait", `{"id":"w","seconds":20}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "completed", data(t, m)["status"])
	st, m = f.post("/v1/shell/view", `{"id":"w"}`)
	require.Equal(t, http.StatusOK, st)
	d = data(t, m)
	assert.Equal(t, "ready\ngot hello\n", d["output"])
	assert.EqualValues(t, 0, d["exit_code"])

	st, m = f.post("/v1/shell/exec", `{"id":"k","command":"sleep 60","async_mode":true}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "running", data(t, m)["status"])
	start = time.Now()
	st, m = f.post("/v1/shell/kill", `{"id":"k"}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "terminated", data(t, m)["status"])
	assert.Less(t, time.Since(start), 15*time.Second)
	st, _ = f.post("/v1/shell/view", `{"id":"nope"}`)
	assert.Equal(t, http.StatusNotFound, st)

	st, _ = f.do(http.MethodDelete, "/v1/shell/sessions", "", nil)
	require.Equal(t, http.StatusOK, st)
	st, m = f.do(http.MethodGet, "/v1/shell/sessions", "", nil)
	require.Equal(t, http.StatusOK, st)
	assert.Empty(t, data(t, m)["sessions"])
}

// Items 4, 5 and 6: bash exec_command(timeout=...) answers running with
// ids; /v1/bash/output reads stdout and stderr apart; the session of a
// sync exec is registered.
func TestBashExecTimeoutAndOutput_SDKBashCalls(t *testing.T) {
	f := newFixture(t, nil)
	st, m := f.post("/v1/bash/exec", `{"command":"echo o1; echo e1 >&2; sleep 0.6; echo o2","timeout":0.2}`)
	require.Equal(t, http.StatusOK, st)
	d := data(t, m)
	require.Equal(t, "running", d["status"])
	sid, cid := d["session_id"].(string), d["command_id"].(string)
	require.NotEmpty(t, sid)
	require.NotEmpty(t, cid)
	var stdout, stderr string
	var off, eoff float64
	deadline := time.Now().Add(20 * time.Second)
	status := "running"
	for status == "running" && time.Now().Before(deadline) {
		st, m = f.post("/v1/bash/output", `{"session_id":"`+sid+`","command_id":"`+cid+`","offset":`+num(off)+`,"stderr_offset":`+num(eoff)+`,"wait":true,"wait_timeout":1}`)
		require.Equal(t, http.StatusOK, st)
		d = data(t, m)
		stdout += d["stdout"].(string)
		stderr += d["stderr"].(string)
		off, eoff = d["offset"].(float64), d["stderr_offset"].(float64)
		status = d["command"].(map[string]any)["status"].(string)
	}
	assert.Equal(t, "completed", status)
	assert.Equal(t, "o1\no2\n", stdout)
	assert.Equal(t, "e1\n", stderr, "stderr is kept apart")

	// A sync exec without session_id: its session is readable.
	st, m = f.post("/v1/bash/exec", `{"command":"echo hi; echo oops >&2"}`)
	require.Equal(t, http.StatusOK, st)
	d = data(t, m)
	assert.Equal(t, "completed", d["status"])
	sid = d["session_id"].(string)
	st, m = f.post("/v1/bash/output", `{"session_id":"`+sid+`"}`)
	require.Equal(t, http.StatusOK, st)
	d = data(t, m)
	assert.Equal(t, "hi\n", d["stdout"])
	assert.Equal(t, "oops\n", d["stderr"])
	st, m = f.do(http.MethodGet, "/v1/bash/sessions", "", nil)
	require.Equal(t, http.StatusOK, st)
	var ids []string
	for _, s := range m["data"].([]any) {
		ids = append(ids, s.(map[string]any)["session_id"].(string))
	}
	assert.Contains(t, ids, sid)

	// sessions/create refuses what exec refuses, at once.
	st, _ = f.post("/v1/bash/sessions/create", `{"exec_dir":"/"}`)
	assert.Equal(t, http.StatusForbidden, st)
	st, _ = f.post("/v1/shell/sessions/create", `{"exec_dir":"/"}`)
	assert.Equal(t, http.StatusForbidden, st)
	st, m = f.post("/v1/bash/sessions/create", `{"exec_dir":"`+f.ws+`"}`)
	require.Equal(t, http.StatusOK, st, "control: the workspace is accepted")
	assert.Equal(t, f.ws, data(t, m)["working_dir"])
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func num(f float64) string { return strconv.FormatInt(int64(f), 10) }

// exec_dir on /v1/bash/exec becomes the session's default working
// directory (the SDKs' documentation: "if the session already exists, its
// default working directory is updated for subsequent calls"), and a bash
// session created with exec_dir runs its commands there (the old server
// applied exec_dir to its one command, and ran the created session's
// commands in the workspace while reporting exec_dir as working_dir).
// Control: a session given no directory runs in the workspace.
func TestBashExecDirIsTheSessionDefault(t *testing.T) {
	f := newFixture(t, nil)
	f.touch("sub/x", "made/y")
	pwd := func(body string) (string, map[string]any) {
		st, m := f.post("/v1/bash/exec", body)
		require.Equal(t, http.StatusOK, st, "%v", m)
		d := data(t, m)
		return strings.TrimSpace(d["stdout"].(string)), d
	}
	out, d := pwd(`{"command":"pwd","exec_dir":"` + f.ws + `/sub"}`)
	assert.Equal(t, f.ws+"/sub", out)
	sid := d["session_id"].(string)
	out, _ = pwd(`{"command":"pwd","session_id":"` + sid + `"}`)
	assert.Equal(t, f.ws+"/sub", out, "the session's default is now exec_dir")
	out, _ = pwd(`{"command":"cd /; pwd","session_id":"` + sid + `"}`)
	assert.Equal(t, "/", out)
	out, _ = pwd(`{"command":"pwd","session_id":"` + sid + `"}`)
	assert.Equal(t, f.ws+"/sub", out, "cd inside a command does not stick (the API's documented behaviour)")

	st, m := f.post("/v1/bash/sessions/create", `{"session_id":"made","exec_dir":"`+f.ws+`/made"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	assert.Equal(t, f.ws+"/made", data(t, m)["working_dir"])
	out, _ = pwd(`{"command":"pwd","session_id":"made"}`)
	assert.Equal(t, f.ws+"/made", out, "a session created with exec_dir runs there")
	st, m = f.do(http.MethodGet, "/v1/bash/sessions", "", nil)
	require.Equal(t, http.StatusOK, st)
	for _, s := range m["data"].([]any) {
		info := s.(map[string]any)
		if info["session_id"] == sid {
			assert.Equal(t, f.ws+"/sub", info["working_dir"], "the listing shows the default")
		}
	}

	out, _ = pwd(`{"command":"pwd"}`)
	assert.Equal(t, f.ws, out, "control: a new session starts in the workspace")
	st, _ = f.post("/v1/bash/exec", `{"command":"pwd","session_id":"`+sid+`","exec_dir":"/"}`)
	assert.Equal(t, http.StatusForbidden, st, "a directory the sandbox refuses is refused")
	out, _ = pwd(`{"command":"pwd","session_id":"` + sid + `"}`)
	assert.Equal(t, f.ws+"/sub", out, "and does not become the default")
}

// /v1/shell/exec with Accept: text/event-stream streams (the OpenAPI
// document offers it; the old server answered plain JSON): each event is
// the answer at that moment, the output growing, the last one final. The
// validating transport checks every event against the JSON answer's
// schema. Control: without the header the answer is the JSON envelope.
func TestShellExecEventStream(t *testing.T) {
	f := newFixture(t, nil)
	req, err := http.NewRequest(http.MethodPost, f.ts.URL+"/v1/shell/exec",
		strings.NewReader(`{"command":"echo one; sleep 0.6; echo two","id":"sse"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := f.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var events []map[string]any
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(d), &m), d)
			events = append(events, data(t, m))
		}
	}
	require.GreaterOrEqual(t, len(events), 2, "%s", body)
	first := -1
	for i, e := range events {
		if e["output"] == "one\n" && e["status"] == "running" {
			first = i
			break
		}
	}
	assert.GreaterOrEqual(t, first, 0, "the first line came while the command slept: %s", body)
	last := events[len(events)-1]
	assert.Equal(t, "completed", last["status"])
	assert.Equal(t, "one\ntwo\n", last["output"])
	assert.EqualValues(t, 0, last["exit_code"])

	st, m := f.post("/v1/shell/exec", `{"command":"echo plain","id":"sse"}`)
	require.Equal(t, http.StatusOK, st, "control")
	assert.Equal(t, "plain\n", data(t, m)["output"], "control: JSON without the header")
}
