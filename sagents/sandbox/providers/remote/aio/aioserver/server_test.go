package aioserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/internal/spectest"
)

type fixture struct {
	srv  *aioserver.Server
	ts   *httptest.Server
	ws   string
	v    *spectest.Validator
	t    *testing.T
	hc   *http.Client
	opts aioserver.Options
}

func newFixture(t *testing.T, mod func(*aioserver.Options)) *fixture {
	t.Helper()
	t.Setenv("SAGE_HOME", t.TempDir())
	ws := t.TempDir()
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: ws})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	opts := aioserver.Options{Handle: h, MaxBodyBytes: 1 << 20, BodyTimeout: 500 * time.Millisecond}
	if mod != nil {
		mod(&opts)
	}
	srv, err := aioserver.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close(context.Background()) }) // before the Handle's Close
	require.NoError(t, srv.Ready(context.Background()))
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ReadHeaderTimeout = 300 * time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close)
	f := &fixture{srv: srv, ts: ts, ws: h.WorkspacePath(), v: spectest.Load(t), t: t, opts: opts}
	f.hc = &http.Client{Transport: f.v.Transport(t, http.DefaultTransport)}
	return f
}

// do sends a request through the validating transport.
func (f *fixture) do(method, path, contentType string, body []byte) (int, map[string]any) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, bytes.NewReader(body))
	require.NoError(f.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if f.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+f.opts.Token)
	}
	resp, err := f.hc.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// postOK posts body to path, requires 200 and returns the answer's data.
func (f *fixture) postOK(t *testing.T, path, body string) map[string]any {
	t.Helper()
	st, m := f.post(path, body)
	require.Equal(t, http.StatusOK, st, "%v", m)
	return data(t, m)
}

func (f *fixture) post(path, body string) (int, map[string]any) {
	return f.do(http.MethodPost, path, "application/json", []byte(body))
}

func (f *fixture) alive() {
	f.t.Helper()
	st, _ := f.do(http.MethodGet, "/v1/sandbox", "", nil)
	assert.Equal(f.t, http.StatusOK, st, "server stopped serving")
}

func TestBadInput(t *testing.T) {
	f := newFixture(t, nil)
	t.Run("malformed JSON is 422", func(t *testing.T) {
		st, m := f.doRaw(http.MethodPost, "/v1/file/read", `{"file":`)
		assert.Equal(t, http.StatusUnprocessableEntity, st)
		assert.Equal(t, "json_invalid", detailType(m))
		f.alive()
	})
	t.Run("missing required field is 422", func(t *testing.T) {
		for _, ep := range []string{"/v1/bash/exec", "/v1/shell/exec", "/v1/file/read", "/v1/file/write", "/v1/file/list", "/v1/file/find", "/v1/file/grep", "/v1/bash/output", "/v1/bash/kill"} {
			st, m := f.doRaw(http.MethodPost, ep, `{}`)
			assert.Equal(t, http.StatusUnprocessableEntity, st, ep)
			assert.Equal(t, "missing", detailType(m), ep)
		}
		f.alive()
	})
	t.Run("wrong type is 422", func(t *testing.T) {
		st, _ := f.doRaw(http.MethodPost, "/v1/bash/exec", `{"command": 5}`)
		assert.Equal(t, http.StatusUnprocessableEntity, st)
		st, _ = f.doRaw(http.MethodPost, "/v1/bash/exec", `[1,2]`)
		assert.Equal(t, http.StatusUnprocessableEntity, st)
	})
	// Issue #13 item 1: file errors are HTTP 200 + success:false + a
	// FileOperationError (the AIO contract; the SDKs return them as data);
	// only the download keeps HTTP errors.
	fileErr := func(t *testing.T, st int, m map[string]any, errType string) {
		t.Helper()
		assert.Equal(t, http.StatusOK, st)
		assert.Equal(t, false, m["success"])
		data, _ := m["data"].(map[string]any)
		require.NotNil(t, data, "data holds a FileOperationError: %v", m)
		assert.Equal(t, errType, data["error_type"])
	}
	t.Run("path outside the workspace is a permission_denied FileOperationError", func(t *testing.T) {
		for _, body := range []string{`{"file":"/etc/passwd"}`, `{"file":"../../etc/passwd"}`} {
			st, m := f.post("/v1/file/read", body)
			fileErr(t, st, m, "permission_denied")
		}
		st, m := f.post("/v1/file/write", `{"file":"/tmp/escape.txt","content":"x"}`)
		fileErr(t, st, m, "permission_denied")
		st, m = f.post("/v1/file/list", `{"path":"/"}`)
		fileErr(t, st, m, "permission_denied")
		st, m = f.post("/v1/file/glob", `{"path":"/","pattern":"*"}`)
		fileErr(t, st, m, "permission_denied")
		st, _ = f.do(http.MethodGet, "/v1/file/download?path=/etc/passwd", "", nil)
		assert.Equal(t, http.StatusForbidden, st, "the download keeps HTTP errors")
		st, _ = f.post("/v1/bash/exec", `{"command":"true","exec_dir":"/"}`)
		assert.Equal(t, http.StatusForbidden, st)
		f.alive()
	})
	t.Run("missing file is a not_found FileOperationError", func(t *testing.T) {
		st, m := f.post("/v1/file/read", `{"file":"nope.txt"}`)
		fileErr(t, st, m, "not_found")
		assert.Equal(t, "ENOENT", m["data"].(map[string]any)["errno_name"])
		st, m = f.post("/v1/file/find", `{"path":"nodir","glob":"*"}`)
		fileErr(t, st, m, "not_found")
		st, _ = f.do(http.MethodGet, "/v1/file/download?path=nope.txt", "", nil)
		assert.Equal(t, http.StatusNotFound, st)
		st, _ = f.do(http.MethodDelete, "/v1/shell/sessions/nope", "", nil)
		assert.Equal(t, http.StatusNotFound, st)
	})
	t.Run("50 MB body is 413", func(t *testing.T) {
		big := `{"file":"big.txt","content":"` + strings.Repeat("x", 50<<20) + `"}`
		st, _ := f.doRaw(http.MethodPost, "/v1/file/write", big)
		assert.Equal(t, http.StatusRequestEntityTooLarge, st)
		// Without Content-Length the limit still holds.
		st = f.chunked("/v1/file/write", big)
		assert.Equal(t, http.StatusRequestEntityTooLarge, st)
		f.alive()
	})
	t.Run("slow headers: the connection is closed", func(t *testing.T) {
		c, err := net.Dial("tcp", f.ts.Listener.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("POST /v1/file/read HTTP/1.1\r\nHost: x\r\n"))
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		assert.Error(t, err, "server kept a connection whose headers never ended")
		f.alive()
	})
	t.Run("slow body is 408", func(t *testing.T) {
		c, err := net.Dial("tcp", f.ts.Listener.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("POST /v1/file/read HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"fi"))
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufioReader(c), nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		f.alive()
	})
	t.Run("unknown endpoint is a 404 envelope", func(t *testing.T) {
		resp, err := http.Get(f.ts.URL + "/v1/nope")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	})
}

// doRaw sends a JSON body the spec would reject, bypassing request
// validation but still validating the response.
func (f *fixture) doRaw(method, path, body string) (int, map[string]any) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	f.checkResponse(req, resp, raw)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// checkResponse validates only the response: a valid stand-in request for
// the same endpoint is used for routing.
func (f *fixture) checkResponse(req *http.Request, resp *http.Response, raw []byte) {
	stand := req.Clone(context.Background())
	body := []byte(`{"command":"view","file":"x","content":"x","path":"x","glob":"*","pattern":"x","session_id":"x","id":"x","regex":"x","old_str":"x","new_str":"x","input":"x","press_enter":true,"code":"x","language":"python"}`)
	stand.Header.Set("Content-Type", "application/json")
	if err := f.v.Check(stand, body, resp.StatusCode, resp.Header, raw); err != nil {
		f.t.Errorf("response conformance: %v", err)
	}
}

func (f *fixture) chunked(path, body string) int {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.ts.URL+path, io.MultiReader(strings.NewReader(body)))
	require.NoError(f.t, err)
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func detailType(m map[string]any) string {
	d, _ := m["detail"].([]any)
	if len(d) == 0 {
		return ""
	}
	e, _ := d[0].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

func TestEndpoints(t *testing.T) {
	f := newFixture(t, nil)
	st, m := f.post("/v1/file/write", `{"file":"a/b.txt","content":"hello\nworld\n"}`)
	require.Equal(t, http.StatusOK, st, m)
	st, m = f.post("/v1/file/read", `{"file":"a/b.txt","start_line":1}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "world\n", m["data"].(map[string]any)["content"])
	st, m = f.post("/v1/file/find", `{"path":"`+f.ws+`","glob":"*.txt"}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, []any{f.ws + "/a/b.txt"}, m["data"].(map[string]any)["files"])
	st, m = f.post("/v1/file/grep", `{"path":"`+f.ws+`","pattern":"WOR","case_insensitive":true}`)
	require.Equal(t, http.StatusOK, st)
	assert.EqualValues(t, 1, m["data"].(map[string]any)["match_count"])
	st, m = f.post("/v1/file/list", `{"path":"`+f.ws+`","recursive":true}`)
	require.Equal(t, http.StatusOK, st)
	assert.EqualValues(t, 2, m["data"].(map[string]any)["total_count"])
	st, m = f.post("/v1/shell/sessions/create", `{"exec_dir":"`+f.ws+`/a"}`)
	require.Equal(t, http.StatusOK, st)
	sid := m["data"].(map[string]any)["session_id"].(string)
	st, m = f.post("/v1/shell/exec", `{"id":"`+sid+`","command":"ls; echo e >&2; exit 2"}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "b.txt\ne\n", m["data"].(map[string]any)["output"])
	assert.EqualValues(t, 2, m["data"].(map[string]any)["exit_code"])
	st, _ = f.do(http.MethodDelete, "/v1/shell/sessions/"+sid, "", nil)
	assert.Equal(t, http.StatusOK, st)
	st, m = f.post("/v1/bash/exec", `{"command":"sleep 5","hard_timeout":0.3}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, "timed_out", m["data"].(map[string]any)["status"])

	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("path", f.ws+"/up.bin")
	fw, _ := mw.CreateFormFile("file", "up.bin")
	fw.Write([]byte{0, 1, 2, 255})
	mw.Close()
	st, m = f.do(http.MethodPost, "/v1/file/upload", mw.FormDataContentType(), buf.Bytes())
	require.Equal(t, http.StatusOK, st, m)
	assert.EqualValues(t, 4, m["data"].(map[string]any)["file_size"])
	st, m = f.post("/v1/file/read", `{"file":"up.bin"}`)
	assert.Equal(t, http.StatusOK, st)
	assert.Equal(t, false, m["success"], "binary content is refused by /v1/file/read")
	assert.NotEmpty(t, m["hint"])
}

func TestAuth(t *testing.T) {
	f := newFixture(t, func(o *aioserver.Options) { o.Token = "s3cret" })
	resp, err := http.Get(f.ts.URL + "/v1/sandbox")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	st, _ := f.do(http.MethodGet, "/v1/sandbox", "", nil)
	assert.Equal(t, http.StatusOK, st)
}

func TestNotReadyIs503(t *testing.T) {
	t.Setenv("SAGE_HOME", t.TempDir())
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(context.Background())
	srv, err := aioserver.New(aioserver.Options{Handle: h})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/sandbox", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NoError(t, srv.Ready(context.Background()))
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/sandbox", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
}

func TestLoopbackAddr(t *testing.T) {
	assert.True(t, aioserver.LoopbackAddr("127.0.0.1:8080"))
	assert.True(t, aioserver.LoopbackAddr("[::1]:0"))
	assert.True(t, aioserver.LoopbackAddr("localhost:1"))
	assert.False(t, aioserver.LoopbackAddr("0.0.0.0:8080"))
	assert.False(t, aioserver.LoopbackAddr(":8080"))
	assert.False(t, aioserver.LoopbackAddr("10.0.0.1:80"))
}

// The document and the server agree on the routes: every operation the
// subset document lists is served (not the catch-all 404), and a route it
// does not list is not.
func TestServesEveryDocumentedRoute(t *testing.T) {
	f := newFixture(t, nil)
	doc, err := spectest.LoadSubset()
	require.NoError(t, err)
	ops := doc.Operations()
	require.NotEmpty(t, ops)
	catchAll := func(method, path string) bool {
		req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		msg, _ := m["message"].(string)
		return resp.StatusCode == http.StatusNotFound && strings.HasPrefix(msg, "no such endpoint")
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		path = strings.ReplaceAll(path, "{session_id}", "s1")
		assert.False(t, catchAll(method, path), "%s is documented but not served", op)
	}
	assert.True(t, catchAll(http.MethodGet, "/v1/browser/info"), "an undocumented route is served")
}
