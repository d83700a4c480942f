package opensandbox

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
)

func TestAPIErrorSentinels(t *testing.T) {
	for status, want := range map[int]error{404: fs.ErrNotExist, 401: fs.ErrPermission, 403: fs.ErrPermission, 409: fs.ErrExist} {
		assert.ErrorIs(t, &APIError{Status: status}, want, "HTTP %d", status)
	}
	assert.NotErrorIs(t, &APIError{Status: 500}, fs.ErrNotExist)
}

func TestExecdClientAgainstFake(t *testing.T) {
	srv := opensandboxtest.New(t)
	s, err := open(context.Background(), testConfig(srv))
	require.NoError(t, err)
	defer s.Close(context.Background())
	ctx := context.Background()
	e := s.execdClient()

	m, err := e.metrics(ctx)
	require.NoError(t, err)
	assert.Positive(t, m.CPUCount)

	var id string
	require.NoError(t, e.runCommand(ctx, runCommandRequest{Command: "printf 'a\\nb\\nc\\n'", Background: true},
		func(ev event) error {
			if ev.Type == eventInit {
				id = ev.Text
			}
			return nil
		}))
	require.NotEmpty(t, id)
	require.Eventually(t, func() bool { st, err := e.status(ctx, id); return err == nil && !st.Running }, 5*time.Second, 20*time.Millisecond)
	all, tail, err := e.logs(ctx, id, -1, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "a\nb\nc\n", string(all))
	assert.EqualValues(t, 6, tail, "the tail cursor is the byte offset the log ends at")
	rest, _, err := e.logs(ctx, id, 2, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "b\nc\n", string(rest), "a cursor is a byte offset")
	part, _, err := e.logs(ctx, id, 0, 3)
	require.NoError(t, err)
	assert.Equal(t, "a\nb", string(part), "at most max bytes")

	_, err = e.status(ctx, "no-such-command")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = e.download(ctx, s.workspace()+"/missing", 10)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, e.upload(ctx, s.workspace()+"/big", make([]byte, 100), 0o600))
	_, err = e.download(ctx, s.workspace()+"/big", 99)
	assert.ErrorContains(t, err, "larger than 99 bytes")
	info, err := e.info(ctx, s.workspace()+"/big")
	require.NoError(t, err)
	assert.Equal(t, 600, info[s.workspace()+"/big"].Mode, "modes travel as octal digits")
}

// TestSessions checks the session calls' requests and answers on the
// wire (the fake execd has no sessions).
func TestSessions(t *testing.T) {
	var seen []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, r.Method+" "+r.URL.Path+" "+string(b))
		assert.Equal(t, "tok", r.Header.Get(headerExecdToken))
		switch r.URL.Path {
		case "/session":
			_ = json.NewEncoder(w).Encode(map[string]string{"session_id": "s1"})
		case "/session/s1/run":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"type\":\"stdout\",\"text\":\"/tmp\\n\"}\n\n")
		}
	}))
	defer hs.Close()
	e := NewExecdClient(hs.URL, "tok", nil, nil)
	ctx := context.Background()
	id, err := e.createSession(ctx, "/tmp")
	require.NoError(t, err)
	assert.Equal(t, "s1", id)
	var out string
	require.NoError(t, e.runInSession(ctx, id, "pwd", time.Second, func(ev event) error { out += ev.Text; return nil }))
	assert.Equal(t, "/tmp\n", out)
	require.NoError(t, e.deleteSession(ctx, id))
	assert.Equal(t, []string{`POST /session {"cwd":"/tmp"}`, `POST /session/s1/run {"command":"pwd","timeout":1000}`, "DELETE /session/s1 "}, seen)
}

func TestConfigFrom(t *testing.T) {
	env := map[string]string{"SAGE_OPENSANDBOX_URL": "http://127.0.0.1:8080/v1", "MY_KEY": "k1", "SAGE_OPENSANDBOX_IMAGE": "py:3"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := configFrom(sandbox.RemoteConfig{ProviderConfig: map[string]any{
		keyAPIKeyEnv: "MY_KEY", keyThreadID: "t1", keyEntrypoint: []any{"sleep", "inf"},
		keyEnv: map[string]any{"A": 1}, keyTTLSeconds: 120, keyMemory: "1Gi"}}, lookup)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:8080/v1", c.URL)
	assert.Equal(t, "k1", c.APIKey)
	assert.Equal(t, "py:3", c.Image)
	assert.Equal(t, []string{"sleep", "inf"}, c.Entrypoint)
	assert.Equal(t, map[string]string{"A": "1"}, c.Env)
	assert.Equal(t, 2*time.Minute, c.TTL)
	assert.Equal(t, "1Gi", c.Resources["memory"])
	assert.True(t, c.Keep, "a thread's sandbox is kept by default")

	for name, tc := range map[string]struct {
		pc    map[string]any
		field string
	}{
		"no url":       {map[string]any{keyURL: ""}, "sandbox.remote.server_url"},
		"unset keyenv": {map[string]any{keyURL: "http://x", keyAPIKeyEnv: "NOPE"}, "sandbox.remote.provider_config.api_key_env"},
		"short ttl":    {map[string]any{keyURL: "http://x", keyTTLSeconds: 5}, "sandbox.remote.provider_config.ttl_seconds"},
		"bad policy":   {map[string]any{keyURL: "http://x", keyShutdownPolicy: "maybe"}, "sandbox.remote.provider_config.shutdown_policy"},
		"bad env":      {map[string]any{keyURL: "http://x", keyEnv: map[string]any{"A=B": "x"}}, "sandbox.remote.provider_config.env"},
		"relative ws":  {map[string]any{keyURL: "http://x", keyWorkspace: "ws"}, "sandbox.remote.provider_config.workspace"},
	} {
		_, err := configFrom(sandbox.RemoteConfig{ProviderConfig: tc.pc}, func(string) (string, bool) { return "", false })
		var ce *sandbox.ConfigError
		if assert.ErrorAs(t, err, &ce, name) {
			assert.Equal(t, tc.field, ce.Field, name)
		}
	}
}

// TestBusyCodeContextIsAnError: a second cell sent to a code context that
// is still running one gets execd's error object inside the 200 stream
// (as recorded from the real execd); it comes back as an *APIError, not
// as "an event without a type".
func TestBusyCodeContextIsAnError(t *testing.T) {
	srv := opensandboxtest.New(t)
	s, err := open(context.Background(), testConfig(srv))
	require.NoError(t, err)
	defer s.Close(context.Background())
	ctx := context.Background()
	cc, err := s.execdClient().createContext(ctx, "python")
	require.NoError(t, err)
	first := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		first <- s.execdClient().runCode(ctx, cc, "import time; time.sleep(1.5)", func(ev event) error {
			if ev.Type == eventInit {
				close(started)
			}
			return nil
		})
	}()
	<-started
	time.Sleep(100 * time.Millisecond)
	err = s.execdClient().runCode(ctx, cc, "print(2)", func(event) error { return nil })
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "RUNTIME_ERROR", ae.Code)
	assert.Contains(t, ae.Message, "session is busy")
	require.NoError(t, <-first, "the first cell ends normally (the control)")
}

// TestPythonContextStartIsBounded: execd waits for its Jupyter server
// (for ever when the sandbox has none, as a real lifecycle server's
// sandbox without Jupyter showed); the command timeout bounds it.
func TestPythonContextStartIsBounded(t *testing.T) {
	srv := opensandboxtest.New(t)
	srv.CodeContextHangs = true
	h := openSandbox(t, srv, nil)
	defer h.Close(context.Background())
	start := time.Now()
	_, err := h.ExecutePython(context.Background(), "1", sandbox.PythonOptions{ExecOptions: sandbox.ExecOptions{Timeout: time.Second}})
	require.Error(t, err)
	assert.ErrorContains(t, err, "kernelspec named python")
	assert.Less(t, time.Since(start), 10*time.Second)
}

// TestOutputWithoutExecdFiles: where execd's output files cannot be read
// (its TMPDIR is elsewhere), the output is rebuilt from the line events:
// every line gets "\n" back, the last one too.
func TestOutputWithoutExecdFiles(t *testing.T) {
	srv := opensandboxtest.New(t)
	h := openSandbox(t, srv, map[string]any{keyExecdTmp: "/nonexistent-execd-tmp"})
	defer h.Close(context.Background())
	res, err := h.ExecuteCommand(context.Background(), "echo a; echo; printf 'b\\r\\nc'; echo e >&2", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a\n\nb\nc\n", res.Stdout, "line ends become \\n, a last line gets one")
	assert.Equal(t, "e\n", res.Stderr)
	res, err = h.ExecuteCommand(context.Background(), "printf 'a\\r\\nb'", sandbox.ExecOptions{Workdir: "."})
	require.NoError(t, err)
	assert.Equal(t, "a\nb\n", res.Stdout)
}
