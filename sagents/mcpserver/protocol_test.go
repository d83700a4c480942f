package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/mcpserver"
	"github.com/sage-go/sage/sagents/observability"
	"github.com/sage-go/sage/sagents/observability/observabilitytest"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// These tests speak the protocol on the wire, as an MCP host does, to what
// sage mcp (the stdio transport) and sandboxd's /mcp (the streamable HTTP
// handler) serve.

// wireServer is the tools of a passthrough sandbox (with a recorder of the
// tool events) as an mcpserver.Server.
func wireServer(t *testing.T) (*mcpserver.Server, *observabilitytest.Recorder, string) {
	t.Helper()
	ws := filepath.Join(sandboxtest.TempDir(t), "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	h, err := sandbox.New(t.Context(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: ws, RuntimeDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	rec := &observabilitytest.Recorder{}
	tm := tools.NewManager(h, tools.Options{Observer: observability.New(observability.Options{Handlers: []observability.Handler{rec}})})
	require.NoError(t, tm.Register(tools.Builtins(tools.BuiltinOptions{})...))
	srv, err := mcpserver.New(tm, mcpserver.Options{Files: h})
	require.NoError(t, err)
	return srv, rec, ws
}

// stdioHost is the host's end of a stdio session: it writes lines and
// reads the server's messages, keeping them by id.
type stdioHost struct {
	t    *testing.T
	in   *io.PipeWriter
	mu   sync.Mutex
	got  []map[string]any
	done chan struct{} // closed when the server's output ends
	cond chan struct{} // signalled on each message
}

func startStdio(t *testing.T, transport func(r io.ReadCloser, w io.WriteCloser) mcp.Transport) (*stdioHost, *observabilitytest.Recorder, chan error) {
	t.Helper()
	srv, rec, _ := wireServer(t)
	h, ran := serveStdio(t, srv, transport)
	return h, rec, ran
}

// serveStdio runs srv over transport on pipes until the test ends.
func serveStdio(t *testing.T, srv *mcpserver.Server, transport func(r io.ReadCloser, w io.WriteCloser) mcp.Transport) (*stdioHost, chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &stdioHost{t: t, in: inW, done: make(chan struct{}), cond: make(chan struct{}, 1024)}
	ran := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); inW.Close() })
	go func() {
		ran <- srv.Run(ctx, transport(inR, outW))
		outW.Close()
	}()
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				h.mu.Lock()
				h.got = append(h.got, m)
				h.mu.Unlock()
				h.cond <- struct{}{}
			}
		}
	}()
	return h, ran
}

func (h *stdioHost) send(line string) {
	h.t.Helper()
	_, err := io.WriteString(h.in, line+"\n")
	require.NoError(h.t, err)
}

// reply waits for the response with id (a JSON number or string as Go
// decodes it), or fails after d.
func (h *stdioHost) reply(id any, d time.Duration) map[string]any {
	h.t.Helper()
	deadline := time.After(d)
	for {
		h.mu.Lock()
		for _, m := range h.got {
			if mid, ok := m["id"]; ok && mid == id {
				h.mu.Unlock()
				return m
			}
		}
		h.mu.Unlock()
		select {
		case <-h.cond:
		case <-h.done:
			h.t.Fatalf("the server's output ended before the reply to %v; got %v", id, h.got)
		case <-deadline:
			h.t.Fatalf("no reply to %v in %v; got %v", id, d, h.got)
		}
	}
}

func (h *stdioHost) has(id any) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.got {
		if mid, ok := m["id"]; ok && mid == id {
			return true
		}
	}
	return false
}

func (h *stdioHost) initialize() {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
	require.NotNil(h.t, h.reply(float64(1), 30*time.Second)["result"])
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func errorCode(t *testing.T, m map[string]any) float64 {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "an error response: %v", m)
	return e["code"].(float64)
}

func sageStdio(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
	return &mcpserver.StdioTransport{Reader: r, Writer: w, MaxLineBytes: 4096}
}

func sdkStdio(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
	return &mcp.IOTransport{Reader: r, Writer: w}
}

// TestStdioMalformedLineIsAnswered: a line that is not JSON is answered
// with -32700 (id null) and the session goes on; so do a JSON line that is
// no JSON-RPC message (-32600, with its id), a batch (-32600) and a line
// over the limit (-32600). Control: the SDK's transport ends the session
// at the bad line and the next request gets no reply.
func TestStdioMalformedLineIsAnswered(t *testing.T) {
	h, _, _ := startStdio(t, sageStdio)
	h.initialize()
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"`) // cut short
	h.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	require.NotNil(t, h.reply(float64(3), 30*time.Second)["result"], "the session went on")
	h.mu.Lock()
	var parseErr map[string]any
	for _, m := range h.got {
		if e, ok := m["error"].(map[string]any); ok && e["code"] == float64(-32700) {
			parseErr = m
		}
	}
	h.mu.Unlock()
	require.NotNil(t, parseErr, "the bad line was answered with -32700")
	assert.Nil(t, parseErr["id"], "a parse error's id is null")

	h.send(`{"jsonrpc":"2.0","id":4,"params":{}}`) // no method
	assert.EqualValues(t, -32600, errorCode(t, h.reply(float64(4), 30*time.Second)))
	h.send(`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	h.send(`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`)
	h.send(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	require.NotNil(t, h.reply(float64(7), 30*time.Second)["result"])
	assert.False(t, h.has(float64(5)) || h.has(float64(6)), "the batch and the long line ran nothing")
	n := 0
	h.mu.Lock()
	for _, m := range h.got {
		if e, ok := m["error"].(map[string]any); ok && e["code"] == float64(-32600) {
			n++
		}
	}
	h.mu.Unlock()
	assert.Equal(t, 3, n, "the message without a method, the batch and the long line")

	// Control: the SDK's own stdio transport.
	c, _, ran := startStdio(t, sdkStdio)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"`)
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	select {
	case err := <-ran:
		require.Error(t, err, "control: the session ends")
	case <-time.After(30 * time.Second):
		t.Fatal("control: the SDK transport went on")
	}
	assert.False(t, c.has(float64(3)), "control: the request after the bad line is lost")
}

// TestStdioCancelledCallGetsNoResponse: after the host cancels a tool call
// (notifications/cancelled), the server stops the command and sends no
// response for it; a later request is answered. Control: the SDK's
// transport sends the cancelled call's result.
func TestStdioCancelledCallGetsNoResponse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport func(io.ReadCloser, io.WriteCloser) mcp.Transport
		respond   bool
	}{{"sage", sageStdio, false}, {"control-sdk", sdkStdio, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h, rec, _ := startStdio(t, tc.transport)
			h.initialize()
			h.send(`{"jsonrpc":"2.0","id":"call-9","method":"tools/call","params":{"name":"execute_shell_command","arguments":{"command":"sleep 20","block_until_ms":60000}}}`)
			// Wait for the command to be running, then cancel.
			deadline := time.Now().Add(30 * time.Second)
			for len(observabilitytest.Data[observability.ToolCall](rec, "ToolStart")) == 0 {
				require.True(t, time.Now().Before(deadline), "the call never started")
				time.Sleep(10 * time.Millisecond)
			}
			h.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-9","reason":"user"}}`)
			for len(rec.Errs("ToolError")) == 0 {
				require.True(t, time.Now().Before(deadline), "the cancelled call never ended")
				time.Sleep(10 * time.Millisecond)
			}
			h.send(`{"jsonrpc":"2.0","id":10,"method":"ping"}`)
			require.NotNil(t, h.reply(float64(10), 30*time.Second)["result"])
			time.Sleep(200 * time.Millisecond) // the cancelled call's result, if any, is written by now
			assert.Equal(t, tc.respond, h.has("call-9"), "a response for the cancelled call")
			assert.True(t, errors.Is(rec.Errs("ToolError")[0], context.Canceled), "the call was cancelled: %v", rec.Errs("ToolError")[0])
		})
	}
}

// httpHost posts JSON-RPC to a streamable HTTP endpoint.
type httpHost struct {
	t       *testing.T
	url     string
	session string
}

func (h *httpHost) post(body string, session bool) (*http.Response, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, strings.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session && h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(h.t, err)
	return resp, b
}

// rpc decodes a JSON or SSE answer's (first) JSON-RPC message.
func rpc(t *testing.T, resp *http.Response, b []byte) map[string]any {
	t.Helper()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				b = d
				break
			}
		}
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "a JSON-RPC message: %s (%s)", b, resp.Header.Get("Content-Type"))
	return m
}

// TestHTTPSessionAndMethodErrors: over streamable HTTP, after initialize,
// a request without Mcp-Session-Id is HTTP 400 with a JSON-RPC error
// (-32600): tools/list used to be served (200) and tools/call answered
// with code 0; a request for an unknown method gets -32601 (it used to be
// an HTTP 400 text body), as over stdio. Control: the same requests with
// the session id are served.
func TestHTTPSessionAndMethodErrors(t *testing.T) {
	srv, _, _ := wireServer(t)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	h := &httpHost{t: t, url: ts.URL}
	resp, b := h.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`, false)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	h.session = resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, h.session)
	resp, b = h.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, true)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", b)

	for _, body := range []string{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"x"}}}`} {
		resp, b = h.post(body, false)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, b)
		m := rpc(t, resp, b)
		assert.EqualValues(t, -32600, errorCode(t, m), "%s", b)
		assert.Contains(t, m["error"].(map[string]any)["message"], "Mcp-Session-Id")
	}

	resp, b = h.post(`{"jsonrpc":"2.0","id":4,"method":"tools/frobnicate"}`, true)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	m := rpc(t, resp, b)
	assert.EqualValues(t, -32601, errorCode(t, m))
	assert.EqualValues(t, 4, m["id"])

	resp, b = h.post(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, true)
	require.Equal(t, http.StatusOK, resp.StatusCode, "control: %s", b)
	assert.NotNil(t, rpc(t, resp, b)["result"], "control: served in the session")
}

// TestMissingResourceCode: reading a missing resource answers -32002
// (Resource not found) in the protocol versions up to 2025-11-25, as they
// specify (the SDK answered -32602, the code of later versions, to every
// version). Controls: an existing file is read; a session of a later
// version (the SDK's in-memory client negotiates 2026-07-28) gets -32602.
func TestMissingResourceCode(t *testing.T) {
	for version, want := range map[string]float64{"2025-06-18": -32002, "2025-11-25": -32002} {
		t.Run(version, func(t *testing.T) {
			srv, _, ws := wireServer(t)
			h, _ := serveStdio(t, srv, sageStdio)
			h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
			init := h.reply(float64(1), 30*time.Second)
			require.Equal(t, version, init["result"].(map[string]any)["protocolVersion"])
			h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			h.send(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file://` + ws + `/nope.txt"}}`)
			assert.Equal(t, want, errorCode(t, h.reply(float64(2), 30*time.Second)))
			require.NoError(t, os.WriteFile(filepath.Join(ws, "yes.txt"), []byte("y"), 0o644))
			h.send(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file://` + ws + `/yes.txt"}}`)
			assert.NotNil(t, h.reply(float64(3), 30*time.Second)["result"], "control")
		})
	}

	srv, _, ws := wireServer(t)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(t.Context(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	require.Greater(t, cs.InitializeResult().ProtocolVersion, "2025-11-25")
	_, err = cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "file://" + ws + "/nope.txt"})
	require.Error(t, err)
	var je *jsonrpc.Error
	require.ErrorAs(t, err, &je)
	assert.EqualValues(t, -32602, je.Code, "control: %v", err)
}
