package aioserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A /v1/shell session is one bash process: its pid does not change, a
// background job started by one command is there for the next, and a
// command killed by hard_timeout ends that bash only: the next command
// starts a new one in the session's last directory.
func TestLiveShellIsOneProcess(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, os.Mkdir(filepath.Join(f.ws, "d"), 0o755))
	exec := func(body string) map[string]any { return f.postOK(t, "/v1/shell/exec", body) }
	pid := exec(`{"id":"p","command":"echo $$"}`)["output"]
	assert.Equal(t, pid, exec(`{"id":"p","command":"echo $$"}`)["output"], "the same bash")
	exec(`{"id":"p","command":"sleep 30 & cd d"}`)
	assert.Equal(t, "1\n", exec(`{"id":"p","command":"jobs | wc -l"}`)["output"], "its background job is there")

	start := time.Now()
	d := exec(`{"id":"p","command":"echo before; sleep 60","hard_timeout":1}`)
	assert.Equal(t, "hard_timeout", d["status"])
	assert.Equal(t, "before\n", d["output"])
	assert.Less(t, time.Since(start), 40*time.Second)
	d = exec(`{"id":"p","command":"pwd; echo $$"}`)
	assert.Equal(t, "completed", d["status"])
	assert.NotEqual(t, f.ws+"/d\n"+pid.(string), d["output"], "a new bash")
	assert.Contains(t, d["output"], f.ws+"/d\n", "in the last directory")

	// Output without a final newline, and text that looks like the
	// protocol, come through unchanged.
	d = exec(`{"id":"p","command":"printf 'no newline'"}`)
	assert.Equal(t, "no newline", d["output"])
	d = exec(`{"id":"p","command":"echo '__sage_run x y'; echo \"a'b\\\\c\"; false"}`)
	assert.Equal(t, "__sage_run x y\na'b\\c\n", d["output"])
	assert.EqualValues(t, 1, d["exit_code"])
}

// exec_dir outside the workspace is refused (403) and does not stick: the
// session goes on where it was.
func TestLiveShellRefusedExecDir(t *testing.T) {
	f := newFixture(t, nil)
	st, m := f.post("/v1/shell/exec", `{"id":"r","command":"cd /tmp 2>/dev/null; cd `+f.ws+`; X=1"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	st, _ = f.post("/v1/shell/exec", `{"id":"r","command":"pwd","exec_dir":"/"}`)
	assert.Equal(t, http.StatusForbidden, st)
	st, m = f.post("/v1/shell/exec", `{"id":"r","command":"pwd","exec_dir":"`+f.ws+`"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	assert.Equal(t, f.ws+"\n", data(t, m)["output"])
	st, m = f.post("/v1/shell/exec", `{"id":"r","command":"echo $X; pwd"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	assert.Equal(t, "1\n"+f.ws+"\n", data(t, m)["output"], "exec_dir equal to the current directory keeps the shell")
}
