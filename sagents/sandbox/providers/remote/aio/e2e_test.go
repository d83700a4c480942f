package aio_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/spectest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveSageBinary()
	os.Exit(code)
}

// sage builds ./cmd/sage once per test binary.
func sage(t testing.TB) string {
	t.Helper()
	bin, err := testenv.SageBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// daemon is a running `sage sandboxd --mode passthrough`.
type daemon struct {
	url       string
	token     string
	workspace string
	log       string
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process has been waited for
	waitErr   error
}

// startSandboxd starts sandboxd on 127.0.0.1:0 with a token (as in
// production; the token file of its private SAGE_HOME is not where the
// tests look), reads the bound address from its first stdout line, and
// waits until GET /v1/sandbox answers 200.
func startSandboxd(t testing.TB, extra ...string) *daemon {
	t.Helper()
	tok := driver.NewID("tok")
	return startDaemon(t, t.TempDir(), tok, append([]string{"--token", tok}, extra...)...)
}

// startDaemon starts sandboxd with SAGE_HOME=home; token is what the
// readiness check sends ("" means the token sandboxd saves in home).
func startDaemon(t testing.TB, home, token string, extra ...string) *daemon {
	t.Helper()
	d := &daemon{workspace: t.TempDir(), done: make(chan struct{}), token: token}
	args := append([]string{"sandboxd", "--mode", "passthrough", "--listen", "127.0.0.1:0",
		"--workspace", d.workspace, "--shutdown-grace", "5s"}, extra...)
	d.cmd = exec.Command(sage(t), args...)
	d.cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "SAGE_SANDBOXD_TOKEN=")
	// A file, not a pipe: Wait must not depend on who else holds it.
	logf, err := os.CreateTemp(t.TempDir(), "sandboxd-*.log")
	require.NoError(t, err)
	d.log = logf.Name()
	d.cmd.Stderr = logf
	defer logf.Close()
	out, err := d.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, d.cmd.Start())
	go func() { d.waitErr = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "sandboxd printed no address")
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	require.True(t, ok, "unexpected first line %q", line)
	d.url = addr
	if d.token == "" && !slices.Contains(extra, "--no-token") {
		d.token, err = aioapi.ReadTokenFile(filepath.Join(home, "sandboxd", "token"))
		require.NoError(t, err)
	}
	waitReady(t, d.url, d.token)
	return d
}

func (d *daemon) stop(t testing.TB) {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		b, _ := os.ReadFile(d.log)
		t.Errorf("sandboxd did not stop on SIGTERM; its log:\n%s", b)
	}
}

// waitReady polls GET /v1/sandbox with a short backoff.
func waitReady(t testing.TB, url, token string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	delay := 5 * time.Millisecond
	for {
		req, err := http.NewRequest(http.MethodGet, url+"/v1/sandbox", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxd at %s not ready: %v", url, err)
		}
		time.Sleep(delay)
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// openRemote returns a validated remote Handle on d through sandbox.New.
func openRemote(t testing.TB, d *daemon, v *spectest.Validator) *sandbox.Sandbox {
	t.Helper()
	cfg := sandbox.Config{Mode: sandbox.Remote, Remote: sandbox.RemoteConfig{Provider: "aio", ServerURL: d.url, APIKey: d.token}}
	if v == nil {
		h, err := sandbox.New(context.Background(), cfg)
		require.NoError(t, err)
		return h
	}
	h, err := aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: d.url, Token: d.token, Transport: v.Transport(t, aioapi.NewTransport())})
	require.NoError(t, err)
	return sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, h)
}
