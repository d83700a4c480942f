package aio_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
)

func TestProxyBypass(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.example:3128")
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
	t.Setenv("NO_PROXY", "")
	for host, direct := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:1": true, "localhost:80": true, "10.1.2.3": true,
		"192.168.0.7:9": true, "172.16.0.1": true, "169.254.1.1": true, "sandbox.example.com": false, "8.8.8.8": false,
	} {
		req := &http.Request{URL: &url.URL{Scheme: "http", Host: host}}
		p, err := aio.Proxy(req)
		require.NoError(t, err)
		if direct {
			assert.Nil(t, p, host)
		} else if assert.NotNil(t, p, host) {
			assert.Equal(t, "proxy.example:3128", p.Host)
		}
	}
}

func TestErrorsAreTyped(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/file/read": // the spec's documented style: 200, success:false, FileOperationError
			fmt.Fprint(w, `{"success":false,"message":"No such file","data":{"path":"/x","operation":"read","message":"No such file","error_type":"file_not_found","errno":2,"errno_name":"ENOENT"},"hint":"check the path"}`)
		case "/v1/file/list":
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"success":false,"message":"outside","data":null,"hint":null}`)
		case "/v1/file/find": // sandboxd's form since issue #13: 200 with a permission FileOperationError
			fmt.Fprint(w, `{"success":false,"message":"outside","data":{"path":"/","operation":"find","message":"outside","error_type":"permission_denied","retryable":false,"errno":null,"errno_name":null},"hint":null}`)
		case "/v1/file/grep": // the older form: an HTTP error with a FileOperationError
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"success":false,"message":"gone","data":{"path":"/g","operation":"grep","message":"gone","error_type":"not_found","retryable":false,"errno":2,"errno_name":"ENOENT"},"hint":null}`)
		case "/v1/file/write":
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"detail":[{"loc":["body","file"],"msg":"Field required","type":"missing"}]}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"detail":"boom"}`)
		}
	}))
	defer ts.Close()
	c, err := aio.NewClient(ts.URL, aio.ClientOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.ReadFile(ctx, aio.FileReadRequest{File: "/x"})
	var ae *aio.APIError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, "check the path", ae.Hint)
	assert.Equal(t, http.StatusOK, ae.Status)
	_, err = c.ListFiles(ctx, aio.FileListRequest{Path: "/"})
	assert.ErrorIs(t, err, fs.ErrPermission)
	// Both forms of a file error are errors that match the fs sentinels.
	_, err = c.FindFiles(ctx, aio.FileFindRequest{Path: "/", Glob: "*"})
	assert.ErrorIs(t, err, fs.ErrPermission)
	assert.NotErrorIs(t, err, fs.ErrNotExist)
	_, err = c.GrepFiles(ctx, aio.FileGrepRequest{Path: "/g", Pattern: "x"})
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "grep", ae.File.Operation)
	_, err = c.WriteFile(ctx, aio.FileWriteRequest{})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnprocessableEntity, ae.Status)
	assert.Contains(t, ae.Message, "body.file: Field required")
	_, err = c.BashExec(ctx, aio.BashExecRequest{Command: "x"})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "boom", ae.Message)
	assert.False(t, strings.HasPrefix(err.Error(), "Error:"))
}

func TestBearerTokenAndTimeoutFromContext(t *testing.T) {
	got := make(chan string, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		time.Sleep(2 * time.Second)
	}))
	defer ts.Close()
	c, err := aio.NewClient(ts.URL, aio.ClientOptions{Token: "t0k"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Sandbox(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "Bearer t0k", <-got)
}

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
