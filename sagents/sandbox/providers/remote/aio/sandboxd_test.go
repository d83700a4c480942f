package aio_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
)

// TestConcurrentExecsDoNotShareSessions runs commands in parallel on one
// handle: each sees only its own output.
func TestConcurrentExecsDoNotShareSessions(t *testing.T) {
	d := startSandboxd(t)
	h := openRemote(t, d, specValidator(t))
	defer h.Close(context.Background())
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			res, err := h.ExecuteCommand(context.Background(), fmt.Sprintf("for j in 1 2 3; do echo %d-$j; sleep 0.05; done", i), sandbox.ExecOptions{})
			if assert.NoError(t, err) {
				assert.Equal(t, fmt.Sprintf("%d-1\n%d-2\n%d-3\n", i, i, i), res.Stdout)
			}
		})
	}
	wg.Wait()
}

// TestGracefulShutdown sends SIGTERM while a command runs: the command
// finishes, the process exits 0, and new connections are refused.
func TestGracefulShutdown(t *testing.T) {
	d := startSandboxd(t)
	h := openRemote(t, d, nil)
	defer h.Close(context.Background())
	type out struct {
		res *sandbox.CommandResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := h.ExecuteCommand(context.Background(), "sleep 1; echo finished", sandbox.ExecOptions{})
		done <- out{res, err}
	}()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	o := <-done
	require.NoError(t, o.err)
	assert.Equal(t, "finished\n", o.res.Stdout)
	select {
	case <-d.done:
		assert.NoError(t, d.waitErr, "sandboxd exit status")
	case <-time.After(15 * time.Second):
		t.Fatal("sandboxd did not exit after SIGTERM")
	}
	_, err := http.Get(d.url + "/v1/sandbox")
	assert.Error(t, err)
}

func TestSandboxdRefusesNetworkBindWithoutToken(t *testing.T) {
	out, err := exec.Command(sage(t), "sandboxd", "--mode", "passthrough", "--workspace", t.TempDir(), "--listen", "0.0.0.0:0").CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v: %s", err, out)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Contains(t, string(out), "--token")
	out, err = exec.Command(sage(t), "sandboxd", "--mode", "passthrough", "--workspace", t.TempDir(), "--listen", "0.0.0.0:0", "--no-token").CombinedOutput()
	require.True(t, errors.As(err, &ee), "%v: %s", err, out)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Contains(t, string(out), "--no-token is refused")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(out)), "\n")+1, "one line: %s", out)
}

func TestValidatorCatchesMismatches(t *testing.T) {
	v := specValidator(t)
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/bash/exec", nil)
	req.Header.Set("Content-Type", "application/json")
	hdr := http.Header{"Content-Type": {"application/json"}}
	assert.Error(t, v.Check(req, []byte(`{"command":5}`), 200, hdr, []byte(`{"success":true}`)), "bad request body")
	assert.Error(t, v.Check(req, []byte(`{"command":"x"}`), 200, hdr, []byte(`{"success":true,"data":{"status":"done"}}`)), "bad response body")
	assert.Error(t, v.Check(req, []byte(`{"command":"x"}`), 413, http.Header{"Content-Type": {"text/plain"}}, []byte(`too big`)), "undocumented status without the envelope")
	assert.NoError(t, v.Check(req, []byte(`{"command":"x"}`), 200, hdr,
		[]byte(`{"success":true,"message":"ok","hint":null,"data":{"session_id":"s","command_id":"c","command":"x","status":"completed","stdout":"","stderr":"","exit_code":0,"offset":0,"stderr_offset":0}}`)))
}
