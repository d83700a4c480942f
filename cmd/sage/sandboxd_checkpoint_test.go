//go:build linux

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestSandboxdCheckpoints: sage sandboxd --checkpoints serves the
// workspace's checkpoints under /v1/sage (sage's own path): take one,
// list it, roll an rm -rf back, fork into a new session; bad input is an
// HTTP status with a code, behind the same token; without --checkpoints
// the endpoints answer 501.
func TestSandboxdCheckpoints(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home, ws := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	url := startSandboxd(t, home, "--workspace", ws, "--token", "s3cret", "--checkpoints")
	call := func(method, path, body string) (int, map[string]any, []any) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		require.NoError(t, err)
		var m map[string]any
		var l []any
		if json.Unmarshal(b, &m) != nil {
			require.NoError(t, json.Unmarshal(b, &l), "%s", b)
		}
		return resp.StatusCode, m, l
	}
	code, _, _ := call("POST", "/v1/shell/exec", `{"command":"echo one > /workspace/f"}`)
	require.Equal(t, http.StatusOK, code)
	// A Python kernel (/v1/jupyter) is checkpointed with the files and
	// rolled back with them; the response names it.
	cellValue := func(code string) string {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"code": code, "session_id": "k"})
		st, m, _ := call("POST", "/v1/jupyter/execute", string(b))
		require.Equal(t, http.StatusOK, st, "%v", m)
		for _, o := range m["data"].(map[string]any)["outputs"].([]any) {
			if o := o.(map[string]any); o["output_type"] == "execute_result" {
				return o["data"].(map[string]any)["text/plain"].(string)
			}
		}
		return ""
	}
	cellValue("x = 1")
	code, cp, _ := call("POST", "/v1/sage/checkpoints", "")
	require.Equal(t, http.StatusCreated, code, "%v", cp)
	id, _ := cp["id"].(string)
	require.True(t, strings.HasPrefix(id, "ck-"), "%v", cp)
	assert.Equal(t, "files+processes", cp["covers"], "%v", cp)
	assert.Equal(t, []any{"python kernel k"}, cp["processes"], "%v", cp)
	cellValue("x = 2")
	code, _, list := call("GET", "/v1/sage/checkpoints", "")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, list, 1)
	code, _, _ = call("POST", "/v1/shell/exec", `{"command":"rm -rf /workspace/*"}`)
	require.Equal(t, http.StatusOK, code)
	code, m, _ := call("POST", "/v1/sage/checkpoints/"+id+"/rollback", "")
	require.Equal(t, http.StatusOK, code, "%v", m)
	assert.Equal(t, []any{"python kernel k"}, m["restored"], "%v", m)
	assert.Equal(t, "1", cellValue("x"), "the kernel's variables are the checkpoint's again")
	code, m, _ = call("POST", "/v1/file/read", `{"file":"/workspace/f"}`)
	require.Equal(t, http.StatusOK, code, "%v", m)
	assert.Equal(t, "one\n", m["data"].(map[string]any)["content"])
	code, m, _ = call("POST", "/v1/shell/exec", `{"command":"cat f"}`)
	require.Equal(t, http.StatusOK, code, "%v", m)
	assert.Equal(t, "one", strings.TrimSpace(m["data"].(map[string]any)["output"].(string)),
		"the session's shell (stopped for the rollback, started again in its directory) sees the restored files")

	code, m, _ = call("POST", "/v1/sage/checkpoints/ck-000000000000/rollback", "")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "unknown_checkpoint", m["code"], "%v", m)
	code, m, _ = call("POST", "/v1/sage/turns/1/rollback", "")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "unknown_turn", m["code"], "%v", m)
	assert.Contains(t, m["error"], "sage agent --checkpoints")
	code, m, _ = call("POST", "/v1/sage/turns/x/rollback", "")
	assert.Equal(t, http.StatusBadRequest, code, "%v", m)
	code, m, _ = call("POST", "/v1/sage/checkpoints/"+id+"/fork", `{"session":"../x"}`)
	assert.Equal(t, http.StatusBadRequest, code, "%v", m)
	code, m, _ = call("POST", "/v1/sage/checkpoints/"+id+"/fork", `{"sesion":"f1"}`)
	assert.Equal(t, http.StatusBadRequest, code, "an unknown key: %v", m)
	code, m, _ = call("POST", "/v1/sage/checkpoints/"+id+"/fork", `{"session":"f1"}`)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	b, err := os.ReadFile(filepath.Join(home, "sessions", "f1", "workspace", "f"))
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(b))
	code, m, _ = call("POST", "/v1/sage/checkpoints/"+id+"/fork", `{"session":"f1"}`)
	assert.Equal(t, http.StatusConflict, code, "%v", m)
	code, m, _ = call("GET", "/v1/sage/nothing", "")
	assert.Equal(t, http.StatusNotFound, code, "%v", m)

	req, err := http.NewRequest("GET", url+"/v1/sage/checkpoints", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token guards /v1/sage too")

	plain := startSandboxd(t, sandboxtest.TempDir(t), "--workspace", sandboxtest.TempDir(t), "--no-token")
	resp, err = http.Post(plain+"/v1/sage/checkpoints", "application/json", nil)
	require.NoError(t, err)
	var e map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	resp.Body.Close()
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode, "%v", e)
	assert.Equal(t, "unsupported", e["code"])
}
