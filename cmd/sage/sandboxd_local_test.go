package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSandboxdLocalMode serves a local-mode (bwrap) sandbox with the real
// binary and runs commands in it through `sage exec --mode remote`.
func TestSandboxdLocalMode(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home, ws := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	srv := exec.Command(sageBin, "sandboxd", "--listen", "127.0.0.1:0", "--workspace", ws)
	srv.Env = append(os.Environ(), "SAGE_HOME="+home)
	out, err := srv.StdoutPipe()
	require.NoError(t, err)
	logs := &lockedBuffer{}
	srv.Stderr = logs
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			srv.Process.Kill()
			t.Errorf("sandboxd did not stop on SIGTERM; log:\n%s", logs.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "sandboxd log:\n%s", logs.String())
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), line)

	remote := func(args ...string) cliRun {
		cmd := exec.Command(sageBin, append([]string{"exec", "--mode", "remote"}, args...)...)
		cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "SAGE_REMOTE_PROVIDER=aio", "SAGE_REMOTE_URL="+url)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return cliRun{o.String(), e.String(), code}
	}
	var r cliRun
	require.Eventually(t, func() bool { r = remote("--", "pwd; echo hi > f.txt"); return r.code == 0 }, 20*time.Second, 100*time.Millisecond,
		"remote exec never worked: %+v\nsandboxd log:\n%s", r, logs.String())
	assert.Equal(t, "/workspace\n", r.stdout, "commands run in the bwrap workspace")
	b, err := os.ReadFile(ws + "/f.txt")
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(b))
	r = remote("--", "cat /etc/shadow 2>/dev/null | grep -c root; ls /root 2>&1; exit 3")
	assert.Equal(t, 3, r.code)
	assert.NotContains(t, r.stdout, "1\n", "/etc/shadow readable through sandboxd")
	assert.Contains(t, r.stdout, "No such file", "the host's /root is visible through sandboxd")
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
