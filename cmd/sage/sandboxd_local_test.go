package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// TestSandboxdLocalMode serves a local-mode (bwrap) sandbox with the real
// binary and runs commands in it through `sage exec --mode remote`.
func TestSandboxdLocalMode(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home, ws := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	url := startSandboxd(t, home, "--workspace", ws)

	remote := func(args ...string) cliRun {
		cmd := exec.Command(sageBin, append([]string{"exec", "--mode", "remote"}, args...)...)
		cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "SAGE_REMOTE_PROVIDER=aio", "SAGE_REMOTE_URL="+url)
		return runCmd(t, cmd)
	}
	var r cliRun
	require.Eventually(t, func() bool { r = remote("--", "pwd; echo hi > f.txt"); return r.code == 0 }, 20*time.Second, 100*time.Millisecond,
		"remote exec never worked: %+v", r)
	assert.Equal(t, "/workspace\n", r.stdout, "commands run in the bwrap workspace")
	b, err := os.ReadFile(ws + "/f.txt")
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(b))
	r = remote("--", "cat /etc/shadow 2>/dev/null | grep -c root; ls /root 2>&1; exit 3")
	assert.Equal(t, 3, r.code)
	assert.NotContains(t, r.stdout, "1\n", "/etc/shadow readable through sandboxd")
	assert.Contains(t, r.stdout, "No such file", "the host's /root is visible through sandboxd")
}

// startSandboxd starts `sage sandboxd --listen 127.0.0.1:0 args...` with
// SAGE_HOME=home, stops it at the end of the test and returns its URL.
func startSandboxd(t *testing.T, home string, args ...string) string {
	t.Helper()
	url, _ := startSandboxdLogs(t, home, args...)
	return url
}

// startSandboxdLogs is startSandboxd also returning the server's log.
func startSandboxdLogs(t *testing.T, home string, args ...string) (string, *lockedBuffer) {
	t.Helper()
	srv := exec.Command(sageBin, append([]string{"sandboxd", "--listen", "127.0.0.1:0"}, args...)...)
	srv.Env = append(os.Environ(), "SAGE_HOME="+home)
	out, err := srv.StdoutPipe()
	require.NoError(t, err)
	logs := &lockedBuffer{}
	srv.Stderr = logs
	require.NoError(t, srv.Start())
	watchdog(t, srv)
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case <-done:
		case <-time.After(termGrace):
			srv.Process.Kill()
			t.Errorf("sandboxd did not stop on SIGTERM; log:\n%s", logs.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "sandboxd log:\n%s", logs.String())
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), line)
	return url, logs
}

// TestSandboxdVirtualWorkspace: with --virtual-workspace /mnt/user-data a
// local (bwrap) sandboxd shows the workspace where DeerFlow's paths point
// (issue #13 item 8), for commands and for file calls.
func TestSandboxdVirtualWorkspace(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home, ws := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	url := startSandboxd(t, home, "--workspace", ws, "--no-token", "--virtual-workspace", "/mnt/user-data")
	post := func(path, body string) map[string]any {
		t.Helper()
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		require.Equal(t, true, m["success"], "%v", m)
		return m["data"].(map[string]any)
	}
	post("/v1/file/write", `{"file":"/mnt/user-data/uploads/in.txt","content":"from the host\n"}`)
	d := post("/v1/shell/exec", `{"command":"mkdir -p /mnt/user-data/outputs && cd /mnt/user-data && pwd && cat uploads/in.txt && echo out > outputs/o.txt"}`)
	assert.Equal(t, "/mnt/user-data\nfrom the host\n", d["output"])
	b, err := os.ReadFile(filepath.Join(ws, "outputs", "o.txt"))
	require.NoError(t, err, "a file written at /mnt/user-data/outputs lands in the host workspace")
	assert.Equal(t, "out\n", string(b))
	d = post("/v1/file/read", `{"file":"/mnt/user-data/outputs/o.txt"}`)
	assert.Equal(t, "out\n", d["content"])
	d = post("/v1/file/find", `{"path":"/mnt/user-data","glob":"**/*.txt"}`)
	assert.ElementsMatch(t, []any{"/mnt/user-data/uploads/in.txt", "/mnt/user-data/outputs/o.txt"}, d["files"])
}

// lockedBuffer is the name the tests of this package gave testenv.Buffer.
type lockedBuffer = testenv.Buffer
