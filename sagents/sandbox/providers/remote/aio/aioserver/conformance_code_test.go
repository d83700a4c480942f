package aioserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// outputsOf returns the outputs of an execution answer by output_type
// ("stream:stdout", "execute_result", "error", ...).
func outputsOf(t *testing.T, d map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range d["outputs"].([]any) {
		m := o.(map[string]any)
		key := m["output_type"].(string)
		if key == "stream" {
			key += ":" + m["name"].(string)
		}
		out[key] = m
	}
	return out
}

// Item 7: jupyter.execute_code(code=..., session_id=...) keeps state in
// one long-lived interpreter per session; history is not re-run.
func TestJupyterExecuteKeepsState_SDKJupyter(t *testing.T) {
	testenv.Command(t, "python3", "install python3 (apt-get install python3)")
	f := newFixture(t, nil)
	run := func(body string) map[string]any { return f.postOK(t, "/v1/jupyter/execute", body) }
	d := run(`{"code":"import os\nx = 41\nopen('runs', 'a').write('r')\npid = os.getpid()","session_id":"j1"}`)
	assert.Equal(t, "ok", d["status"])
	assert.Equal(t, "j1", d["session_id"])
	assert.Equal(t, "python3", d["kernel_name"])
	d = run(`{"code":"print('hi')\nx + 1","session_id":"j1","timeout":30}`)
	o := outputsOf(t, d)
	assert.Equal(t, "hi\n", o["stream:stdout"]["text"])
	assert.Equal(t, "42", o["execute_result"]["data"].(map[string]any)["text/plain"], "x set by the previous call")
	d = run(`{"code":"os.getpid() == pid","session_id":"j1"}`)
	assert.Equal(t, "True", outputsOf(t, d)["execute_result"]["data"].(map[string]any)["text/plain"], "one interpreter")
	runs, err := os.ReadFile(filepath.Join(f.ws, "runs"))
	require.NoError(t, err)
	assert.Equal(t, "r", string(runs), "the first cell ran once: state is kept, not replayed")

	d = run(`{"code":"import sys\nsys.stderr.write('warn\\n')\nos.system('echo from-child')\n1/0","session_id":"j1"}`)
	assert.Equal(t, "error", d["status"])
	o = outputsOf(t, d)
	assert.Equal(t, "ZeroDivisionError", o["error"]["ename"])
	assert.Equal(t, "warn\n", o["stream:stderr"]["text"])
	assert.Equal(t, "from-child\n", o["stream:stdout"]["text"], "a subprocess's output is captured too")

	d = run(`{"code":"x","session_id":"j2"}`)
	assert.Equal(t, "NameError", outputsOf(t, d)["error"]["ename"], "control: another session has its own state")
	d = run(`{"code":"x"}`)
	assert.NotEmpty(t, d["session_id"], "a session is made when none is given")
	assert.Equal(t, "error", d["status"])

	// A timeout stops the kernel: the next call gets a fresh one.
	start := time.Now()
	d = run(`{"code":"import time\ntime.sleep(60)","session_id":"j1","timeout":1}`)
	assert.Equal(t, "timeout", d["status"])
	assert.Less(t, time.Since(start), 30*time.Second)
	d = run(`{"code":"'x' in globals()","session_id":"j1"}`)
	assert.Equal(t, "False", outputsOf(t, d)["execute_result"]["data"].(map[string]any)["text/plain"])

	st, m := f.doRaw(http.MethodPost, "/v1/jupyter/execute", `{"code":"1","timeout":0}`)
	assert.Equal(t, http.StatusUnprocessableEntity, st, "%v", m)
	st, _ = f.doRaw(http.MethodPost, "/v1/jupyter/execute", `{"session_id":"j1"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, st)
	st, _ = f.post("/v1/jupyter/execute", `{"code":"1","cwd":"/"}`)
	assert.Equal(t, http.StatusForbidden, st, "cwd is checked as exec_dir is")
}

// Item 7: code.execute_code(language="python", code=..., stateful=True,
// session_id=...) keeps state; stateless runs start fresh.
func TestCodeExecute_SDKCode(t *testing.T) {
	testenv.Command(t, "python3", "install python3 (apt-get install python3)")
	f := newFixture(t, nil)
	run := func(body string) map[string]any { return f.postOK(t, "/v1/code/execute", body) }
	d := run(`{"language":"python","code":"y = 2","stateful":true,"session_id":"c1"}`)
	assert.Equal(t, "ok", d["status"])
	assert.Equal(t, "c1", d["session_id"])
	d = run(`{"language":"python","code":"print(y * 3)","stateful":true,"session_id":"c1"}`)
	assert.Equal(t, "6\n", d["stdout"])
	assert.EqualValues(t, 0, d["exit_code"])
	d = run(`{"language":"python","code":"print(y)"}`)
	assert.Equal(t, "error", d["status"], "control: stateless code does not see the session")
	assert.Nil(t, d["session_id"])
	assert.NotEmpty(t, d["traceback"])
	st, m := f.doRaw(http.MethodPost, "/v1/code/execute", `{"language":"cobol","code":"x"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, st, "%v", m)
}

// Item 7: nodejs.execute_code(code=..., stateful=True) keeps state in
// one node per session; stateless runs are fresh processes with stdin.
func TestNodejsExecute_SDKNodejs(t *testing.T) {
	testenv.Command(t, "node", "install Node.js (apt-get install nodejs)")
	f := newFixture(t, nil)
	run := func(path, body string) map[string]any {
		t.Helper()
		st, m := f.post(path, body)
		require.Equal(t, http.StatusOK, st, "%v", m)
		return data(t, m)
	}
	d := run("/v1/nodejs/execute", `{"code":"let a = 5; var b = 2; a * b","stateful":true}`)
	assert.Equal(t, "ok", d["status"], "%v", d)
	sid := d["session_id"].(string)
	assert.Equal(t, "10", outputsOf(t, d)["execute_result"]["data"].(map[string]any)["text/plain"])
	d = run("/v1/nodejs/execute", `{"code":"console.log(a + b); await Promise.resolve(7)","stateful":true,"session_id":"`+sid+`"}`)
	assert.Equal(t, "ok", d["status"], "%v", d)
	assert.Equal(t, "7\n", d["stdout"])
	d = run("/v1/nodejs/execute", `{"code":"process.stdin.on('data', d => process.stdout.write(d.toString().toUpperCase()))","stdin":"abc"}`)
	assert.Equal(t, "ABC", d["stdout"])
	assert.EqualValues(t, 0, d["exit_code"])
	d = run("/v1/nodejs/execute", `{"code":"console.log(typeof a)"}`)
	assert.Equal(t, "undefined\n", d["stdout"], "control: stateless runs start fresh")
	d = run("/v1/code/execute", `{"language":"javascript","code":"throw new TypeError('bad')"}`)
	assert.Equal(t, "error", d["status"])
	assert.Equal(t, "TypeError", outputsOf(t, d)["error"]["ename"])
}

// nodejs.execute_code(code=..., files={...}): the files are created in the
// execution directory before the code runs (the old server refused any
// files). Without cwd a stateless run gets a fresh directory, removed
// afterwards; with cwd they are written there and stay. A name that is not
// a relative path inside the directory is refused and writes nothing.
func TestNodejsExecuteFiles_SDKNodejs(t *testing.T) {
	testenv.Command(t, "node", "install Node.js (apt-get install nodejs)")
	f := newFixture(t, nil)
	run := func(body string) map[string]any {
		t.Helper()
		st, m := f.post("/v1/nodejs/execute", body)
		require.Equal(t, http.StatusOK, st, "%v", m)
		return data(t, m)
	}
	code := `const fs = require('fs'); console.log(fs.readFileSync('lib/data.json','utf8').trim(), process.cwd())`
	d := run(`{"code":` + quote(code) + `,"files":{"lib/data.json":"{\"n\":1}"}}`)
	require.EqualValues(t, 0, d["exit_code"], "%v", d)
	out := strings.Fields(d["stdout"].(string))
	require.Len(t, out, 2, "%v", d)
	assert.Equal(t, `{"n":1}`, out[0])
	assert.True(t, strings.HasPrefix(out[1], f.ws+"/.sage/"), "a fresh directory under the workspace: %s", out[1])
	_, err := os.Stat(out[1])
	assert.ErrorIs(t, err, os.ErrNotExist, "the fresh directory is removed afterwards")

	require.NoError(t, os.Mkdir(filepath.Join(f.ws, "proj"), 0o755))
	d = run(`{"code":` + quote(code) + `,"cwd":"proj","files":{"lib/data.json":"{\"n\":2}"}}`)
	require.EqualValues(t, 0, d["exit_code"], "%v", d)
	assert.Equal(t, `{"n":2} `+f.ws+"/proj\n", d["stdout"])
	b, err := os.ReadFile(filepath.Join(f.ws, "proj/lib/data.json"))
	require.NoError(t, err, "files in cwd stay")
	assert.Equal(t, `{"n":2}`, string(b))

	for _, name := range []string{"../escape.txt", "/abs.txt", "a/../../b", ""} {
		st, m := f.post("/v1/nodejs/execute", `{"code":"1","files":{`+quote(name)+`:"x"}}`)
		assert.Equal(t, http.StatusBadRequest, st, "%q: %v", name, m)
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(f.ws), "escape.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
