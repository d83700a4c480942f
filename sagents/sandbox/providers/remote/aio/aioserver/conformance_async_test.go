package aioserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// follow reads a command's output with /v1/bash/output from offset 0
// until it is no longer running (at most 30 s), as the SDK's
// bash.get_output(wait=True) loop does.
func (f *fixture) follow(sid, cid string) (stdout, stderr, status string) {
	f.t.Helper()
	var off, eoff float64
	status = "running"
	for deadline := time.Now().Add(30 * time.Second); status == "running" && time.Now().Before(deadline); {
		st, m := f.post("/v1/bash/output", `{"session_id":"`+sid+`","command_id":"`+cid+`","offset":`+num(off)+`,"stderr_offset":`+num(eoff)+`,"wait":true,"wait_timeout":1}`)
		require.Equal(f.t, http.StatusOK, st, "%v", m)
		d := data(f.t, m)
		stdout += d["stdout"].(string)
		stderr += d["stderr"].(string)
		off, eoff = d["offset"].(float64), d["stderr_offset"].(float64)
		status = d["command"].(map[string]any)["status"].(string)
	}
	return stdout, stderr, status
}

// Items 5 and 7: bash.exec_command(command=..., async_mode=True) keeps
// stderr apart; bash.write(session_id=..., command_id=..., input=...)
// feeds the command's stdin.
func TestBashAsyncStreamsAndWrite_SDKBashCalls(t *testing.T) {
	f := newFixture(t, nil)
	st, m := f.post("/v1/bash/exec", `{"command":"echo o1; echo e1 >&2; read line; echo got $line; echo e2 >&2","async_mode":true}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	d := data(t, m)
	require.Equal(t, "running", d["status"])
	sid, cid := d["session_id"].(string), d["command_id"].(string)
	st, m = f.post("/v1/bash/write", `{"session_id":"`+sid+`","command_id":"`+cid+`","input":"hello\n"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	assert.Equal(t, true, m["success"])
	stdout, stderr, status := f.follow(sid, cid)
	assert.Equal(t, "completed", status)
	assert.Equal(t, "o1\ngot hello\n", stdout)
	assert.Equal(t, "e1\ne2\n", stderr, "stderr is kept apart")

	// Input without command_id goes to the session's latest command, as is.
	st, m = f.post("/v1/bash/exec", `{"session_id":"`+sid+`","command":"head -c 5","async_mode":true}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	cid2 := data(t, m)["command_id"].(string)
	st, m = f.post("/v1/bash/write", `{"session_id":"`+sid+`","input":"ab"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	st, m = f.post("/v1/bash/write", `{"session_id":"`+sid+`","input":"cde"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	stdout, _, status = f.follow(sid, cid2)
	assert.Equal(t, "completed", status)
	assert.Equal(t, "abcde", stdout)

	// Controls: a sync command has no stdin; unknown ids are 404; a
	// missing input is FastAPI's 422.
	st, m = f.post("/v1/bash/exec", `{"command":"true"}`)
	require.Equal(t, http.StatusOK, st)
	sync := data(t, m)["session_id"].(string)
	st, _ = f.post("/v1/bash/write", `{"session_id":"`+sync+`","input":"x"}`)
	assert.Equal(t, http.StatusBadRequest, st)
	st, _ = f.post("/v1/bash/write", `{"session_id":"nope","input":"x"}`)
	assert.Equal(t, http.StatusNotFound, st)
	st, _ = f.post("/v1/bash/write", `{"session_id":"`+sid+`","command_id":"nope","input":"x"}`)
	assert.Equal(t, http.StatusNotFound, st)
	st, m = f.doRaw(http.MethodPost, "/v1/bash/write", `{"session_id":"`+sid+`"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, st)
	assert.Equal(t, []any{"body", "input"}, m["detail"].([]any)[0].(map[string]any)["loc"])
}

// An async command's output is a window with absolute offsets: a long
// talker's latest output is readable and offsets keep counting.
func TestBashAsyncWindow(t *testing.T) {
	f := newFixture(t, nil)
	// 6 MiB of 'x' then a marker: beyond the 4 MiB window's start.
	st, m := f.post("/v1/bash/exec", `{"command":"head -c 6291456 /dev/zero | tr '\\0' x; echo END","async_mode":true}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	d := data(t, m)
	sid, cid := d["session_id"].(string), d["command_id"].(string)
	deadline := time.Now().Add(30 * time.Second)
	var out map[string]any
	for time.Now().Before(deadline) {
		st, m = f.post("/v1/bash/output", `{"session_id":"`+sid+`","command_id":"`+cid+`","offset":6291456,"wait":true,"wait_timeout":1}`)
		require.Equal(t, http.StatusOK, st)
		out = data(t, m)
		if out["command"].(map[string]any)["status"] != "running" {
			break
		}
	}
	assert.Equal(t, "END\n", out["stdout"])
	assert.EqualValues(t, 6291456+4, out["offset"])
}

// Item 9: shell.exec_command(command=..., no_change_timeout=N) answers a
// command whose output stalls with status no_change_timeout (it goes on);
// exec_command(truncate=False) keeps all output, the default caps it at
// the spec's 30000.
func TestShellNoChangeTimeoutAndTruncate_SDKShell(t *testing.T) {
	f := newFixture(t, nil)
	start := time.Now()
	st, m := f.post("/v1/shell/exec", `{"id":"n","command":"echo start; sleep 60","no_change_timeout":1}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	d := data(t, m)
	assert.Equal(t, "no_change_timeout", d["status"])
	assert.Equal(t, "start\n", d["output"])
	assert.Nil(t, d["exit_code"])
	assert.Less(t, time.Since(start), 30*time.Second)
	st, m = f.post("/v1/shell/view", `{"id":"n"}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "running", data(t, m)["status"], "the command goes on")
	st, _ = f.post("/v1/shell/kill", `{"id":"n"}`)
	require.Equal(t, http.StatusOK, st)

	st, m = f.post("/v1/shell/exec", `{"command":"for i in 1 2 3 4 5 6; do echo $i; sleep 0.3; done","no_change_timeout":3}`)
	require.Equal(t, http.StatusOK, st)
	d = data(t, m)
	assert.Equal(t, "completed", d["status"], "control: output that keeps changing runs to the end")
	assert.Equal(t, "1\n2\n3\n4\n5\n6\n", d["output"])

	big := `head -c 40000 /dev/zero | tr '\\0' a`
	st, m = f.post("/v1/shell/exec", `{"command":"`+big+`"}`)
	require.Equal(t, http.StatusOK, st)
	out := data(t, m)["output"].(string)
	assert.Less(t, len(out), 30100, "the default caps output at 30000 bytes")
	assert.Contains(t, out, "bytes omitted")
	st, m = f.post("/v1/shell/exec", `{"command":"`+big+`","truncate":false}`)
	require.Equal(t, http.StatusOK, st)
	assert.Len(t, data(t, m)["output"], 40000, "truncate false keeps it all")
	st, m = f.post("/v1/shell/exec", `{"command":"`+big+`","max_output_length":1000}`)
	require.Equal(t, http.StatusOK, st)
	assert.Less(t, len(data(t, m)["output"].(string)), 1100)
}

// bash.kill(session_id=..., signal="SIGKILL") on an async command kills
// it with SIGKILL at once, not SIGTERM first (passthrough: the server
// sees its pid); its stderr does not show the pid line the server uses.
func TestBashKillForce_SDKBashKill(t *testing.T) {
	f := newFixture(t, nil)
	st, m := f.post("/v1/bash/exec", `{"command":"echo up; echo warn >&2; sleep 60","async_mode":true}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	d := data(t, m)
	sid, cid := d["session_id"].(string), d["command_id"].(string)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		_, m = f.post("/v1/bash/output", `{"session_id":"`+sid+`","wait":true,"wait_timeout":1}`)
		if data(t, m)["stdout"] == "up\n" {
			break
		}
	}
	start := time.Now()
	st, m = f.post("/v1/bash/kill", `{"session_id":"`+sid+`","signal":"SIGKILL"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	assert.Less(t, time.Since(start), 20*time.Second)
	_, stderr, status := f.follow(sid, cid)
	assert.Equal(t, "killed", status)
	assert.Equal(t, "warn\n", stderr)
	_, m = f.post("/v1/bash/output", `{"session_id":"`+sid+`"}`)
	assert.EqualValues(t, -9, data(t, m)["command"].(map[string]any)["exit_code"], "SIGKILL, not SIGTERM")
}
