package aioserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/spectest"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// serveLocal serves a new local sandbox of cfg over the AIO API; what
// cannot be made is a missing dependency (what, and its fix).
func serveLocal(t testing.TB, cfg sandbox.Config, what, fix string) (*sandbox.Sandbox, *aioserver.Server, *httptest.Server) {
	t.Helper()
	h, err := sandbox.New(context.Background(), cfg)
	if err != nil {
		testenv.Missing(t, what+": "+err.Error(), fix)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	srv, err := aioserver.New(aioserver.Options{Handle: h})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close(context.Background()) })
	require.NoError(t, srv.Ready(context.Background()))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return h, srv, ts
}

// In local mode (bubblewrap), a shell session is one long-lived bash and
// a code session one long-lived python3, both inside the sandbox.
func TestLocalModeLongLivedSessions(t *testing.T) {
	testenv.Command(t, "bwrap", "install bubblewrap (apt-get install bubblewrap)")
	t.Setenv("SAGE_HOME", t.TempDir())
	h, srv, ts := serveLocal(t, sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)},
		"a local (bubblewrap) sandbox", "run on Linux with bubblewrap and user namespaces")
	f := &fixture{srv: srv, ts: ts, ws: h.WorkspacePath(), v: spectest.Load(t), t: t}
	f.hc = &http.Client{Transport: f.v.Transport(t, http.DefaultTransport), Timeout: 2 * time.Minute}

	exec := func(body string) map[string]any { return f.postOK(t, "/v1/shell/exec", body) }
	pid := exec(`{"id":"l","command":"f() { echo fn; }; Y=kept; echo $$"}`)["output"]
	d := exec(`{"id":"l","command":"f; echo $Y; echo $$"}`)
	assert.Equal(t, "fn\nkept\n"+pid.(string), d["output"], "one bash inside the sandbox")

	st, m := f.post("/v1/jupyter/execute", `{"code":"import os\nx = os.getpid()","session_id":"k"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	require.Equal(t, "ok", data(t, m)["status"], "%v", m)
	st, m = f.post("/v1/jupyter/execute", `{"code":"x == os.getpid()","session_id":"k"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	assert.Equal(t, "True", outputsOf(t, data(t, m))["execute_result"]["data"].(map[string]any)["text/plain"])
}
