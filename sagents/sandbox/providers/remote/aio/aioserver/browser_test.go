package aioserver_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
)

// raw sends a request with the given headers ("Host" sets the Host
// header); the answer (not the request) is validated against the
// project's API document.
func (f *fixture) raw(method, path, body string, hdr map[string]string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	require.NoError(f.t, err)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if path != "/v1/file/upload" { // checkResponse's stand-in request is JSON
		f.checkResponse(req, resp, b) // the request is meant to be invalid; the answer must not be
	}
	return resp.StatusCode, string(b)
}

func (f *fixture) exists(name string) bool {
	_, err := os.Stat(filepath.Join(f.ws, name))
	return err == nil
}

// TestBrowserCannotDriveSandboxd: what any web page can send without a
// CORS preflight (a text/plain POST, or a cross-origin JSON request) runs
// nothing; the same request from the server's own origin (the control)
// does.
func TestBrowserCannotDriveSandboxd(t *testing.T) {
	f := newFixture(t, nil)
	origin := f.ts.URL // http://127.0.0.1:port
	cmd := func(name string) string { return `{"command":"touch ` + name + `"}` }

	st, body := f.raw(http.MethodPost, "/v1/bash/exec", cmd("pwned1"), map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"})
	assert.Equal(t, http.StatusForbidden, st, body)
	st, body = f.raw(http.MethodPost, "/v1/bash/exec", cmd("pwned2"), map[string]string{"Content-Type": "text/plain"})
	assert.Equal(t, http.StatusUnsupportedMediaType, st, body)
	assert.Contains(t, body, "application/json")
	st, body = f.raw(http.MethodPost, "/v1/file/write", `{"file":"pwned3","content":"x"}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	assert.Equal(t, http.StatusUnsupportedMediaType, st, body)
	st, body = f.raw(http.MethodPost, "/v1/bash/exec", cmd("pwned4"), map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"})
	assert.Equal(t, http.StatusForbidden, st, body)
	st, body = f.raw(http.MethodPost, "/v1/bash/exec", cmd("pwned5"), map[string]string{"Content-Type": "application/json", "Origin": "null"})
	assert.Equal(t, http.StatusForbidden, st, body)
	st, _ = f.raw(http.MethodPost, "/v1/file/upload", "", map[string]string{"Content-Type": "multipart/form-data; boundary=x", "Origin": "https://evil.example"})
	assert.Equal(t, http.StatusForbidden, st, "a cross-origin form upload")
	for i := 1; i <= 5; i++ {
		assert.False(t, f.exists(fmt.Sprintf("pwned%d", i)), "request %d ran", i)
	}

	// Controls: the server's own origin, no Origin (a non-browser
	// client), JSON with a charset.
	st, body = f.raw(http.MethodPost, "/v1/bash/exec", cmd("ok1"), map[string]string{"Content-Type": "application/json", "Origin": origin})
	assert.Equal(t, http.StatusOK, st, body)
	st, body = f.raw(http.MethodPost, "/v1/bash/exec", cmd("ok2"), map[string]string{"Content-Type": "application/json; charset=utf-8"})
	assert.Equal(t, http.StatusOK, st, body)
	assert.True(t, f.exists("ok1") && f.exists("ok2"))

	g := newFixture(t, func(o *aioserver.Options) { o.AllowedOrigins = []string{"https://app.example"} })
	st, body = g.raw(http.MethodPost, "/v1/bash/exec", cmd("ok3"), map[string]string{"Content-Type": "application/json", "Origin": "https://app.example"})
	assert.Equal(t, http.StatusOK, st, body)
}

// TestForeignHostIsRefused: DNS rebinding makes a browser send the
// attacker's name as Host; only loopback names, the listening address and
// configured names are served.
func TestForeignHostIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	port := f.ts.Listener.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndexByte(port, ':'):]
	for _, h := range []string{"evil.example" + port, "evil.example", "127.0.0.1.nip.io" + port, "sandbox.example" + port} {
		st, body := f.raw(http.MethodGet, "/v1/sandbox", "", map[string]string{"Host": h})
		assert.Equal(t, http.StatusMisdirectedRequest, st, "Host %s: %s", h, body)
		assert.NotContains(t, body, f.ws, "nothing of the sandbox leaks")
	}
	for _, h := range []string{"localhost" + port, "127.0.0.1" + port, "LOCALHOST", "[::1]" + port, "127.0.0.1"} {
		st, body := f.raw(http.MethodGet, "/v1/sandbox", "", map[string]string{"Host": h})
		assert.Equal(t, http.StatusOK, st, "control: Host %s: %s", h, body)
	}
	g := newFixture(t, func(o *aioserver.Options) { o.AllowedHosts = []string{"sandbox.example"} })
	st, body := g.raw(http.MethodGet, "/v1/sandbox", "", map[string]string{"Host": "sandbox.example" + port})
	assert.Equal(t, http.StatusOK, st, body)
}

// hostDriver is a driver with every capability of the host modes.
type hostDriver interface {
	driver.Driver
	driver.BackgroundRunner
	driver.HostPather
	driver.PythonRunner
	driver.TreeWalker
	driver.HostCopier
}

// countingHandle counts the bytes read through Open and counts ReadFile
// (the whole-file read the server must not use).
type countingHandle struct {
	hostDriver
	read  atomic.Int64
	whole atomic.Int32
}

func (c *countingHandle) Open(ctx context.Context, p string) (io.ReadCloser, fs.FileInfo, error) {
	rc, fi, err := c.hostDriver.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return &countingReader{rc, &c.read}, fi, nil
}

func (c *countingHandle) ReadFile(ctx context.Context, p string) ([]byte, error) {
	c.whole.Add(1)
	return c.hostDriver.ReadFile(ctx, p)
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// TestFileReadIsCapped: a file over the read limit is a clear error after
// reading limit+1 bytes, not a server that loads the file into memory.
func TestFileReadIsCapped(t *testing.T) {
	var ch *countingHandle
	f := newFixture(t, func(o *aioserver.Options) {
		d, ok := o.Handle.Driver().(hostDriver)
		require.True(t, ok)
		ch = &countingHandle{hostDriver: d}
		o.Handle = sandbox.NewFromDriver(sandbox.Config{Mode: o.Handle.Type()}, ch)
		o.MaxReadBytes = 1 << 20
	})
	big := strings.Repeat("x", 5<<20)
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "big.txt"), []byte(big), 0o644))
	st, m := f.post("/v1/file/read", `{"file":"big.txt"}`)
	assert.Equal(t, http.StatusOK, st)
	assert.Equal(t, false, m["success"])
	assert.Contains(t, m["message"], "larger than 1048576 bytes")
	assert.NotEmpty(t, m["hint"])
	assert.LessOrEqual(t, ch.read.Load(), int64(1<<20+1), "read past the cap")
	assert.Zero(t, ch.whole.Load(), "ReadFile loads the whole file")

	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "small.txt"), []byte("small\n"), 0o644))
	st, m = f.post("/v1/file/read", `{"file":"small.txt"}`)
	require.Equal(t, http.StatusOK, st, "control: a file under the cap is read")
	assert.Equal(t, "small\n", m["data"].(map[string]any)["content"])
}

// TestDownloadStreams: a 48 MiB download allocates far less than the
// file's size.
func TestDownloadStreams(t *testing.T) {
	f := newFixture(t, nil)
	const size = 48 << 20
	fh, err := os.Create(filepath.Join(f.ws, "big.bin"))
	require.NoError(t, err)
	require.NoError(t, fh.Truncate(size))
	require.NoError(t, fh.Close())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := http.Get(f.ts.URL + "/v1/file/download?path=big.bin")
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	runtime.ReadMemStats(&after)
	assert.EqualValues(t, size, n)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB for a %d MiB download", alloc>>10, size>>20)
	assert.Less(t, alloc, uint64(8<<20), "the download was buffered")
}

// TestListingsAreBounded: list and find stop at MaxEntries and say so;
// the Go client surfaces the flag.
func TestListingsAreBounded(t *testing.T) {
	f := newFixture(t, func(o *aioserver.Options) { o.MaxEntries = 50 })
	require.NoError(t, os.Mkdir(filepath.Join(f.ws, "d"), 0o755))
	for i := range 120 {
		require.NoError(t, os.WriteFile(filepath.Join(f.ws, "d", fmt.Sprintf("f%03d.txt", i)), nil, 0o644))
	}
	c, err := aioapi.NewClient(f.ts.URL, aioapi.ClientOptions{Transport: f.v.Transport(t, http.DefaultTransport)})
	require.NoError(t, err)
	ctx := context.Background()
	res, err := c.ListFiles(ctx, aioapi.FileListRequest{Path: f.ws + "/d"})
	require.NoError(t, err)
	assert.True(t, res.Truncated)
	assert.LessOrEqual(t, len(res.Files), 50)
	found, err := c.FindFiles(ctx, aioapi.FileFindRequest{Path: f.ws, Glob: "*.txt"})
	require.NoError(t, err)
	assert.True(t, found.Truncated)
	assert.LessOrEqual(t, len(found.Files), 50)
	h, err := aiodriver.Open(ctx, aiodriver.OpenOptions{ServerURL: f.ts.URL, Transport: f.v.Transport(t, http.DefaultTransport)})
	require.NoError(t, err)
	defer h.Close(ctx)
	list, truncated, err := h.ReadDir(ctx, "d", 1000)
	require.NoError(t, err)
	assert.True(t, truncated, "the remote Handle reports the server's cut")
	assert.LessOrEqual(t, len(list), 50)
	tree, err := h.FileTree(ctx, ".", sandbox.TreeOptions{})
	require.NoError(t, err)
	assert.True(t, tree.Truncated)
	_, err = h.Stat(ctx, "d/nope.txt")
	assert.ErrorContains(t, err, "entry limit", "a cut listing cannot prove absence")

	g := newFixture(t, func(o *aioserver.Options) { o.MaxEntries = 1000 })
	require.NoError(t, os.Mkdir(filepath.Join(g.ws, "d"), 0o755))
	for i := range 120 {
		require.NoError(t, os.WriteFile(filepath.Join(g.ws, "d", fmt.Sprintf("f%03d.txt", i)), nil, 0o644))
	}
	c, err = aioapi.NewClient(g.ts.URL, aioapi.ClientOptions{})
	require.NoError(t, err)
	res, err = c.ListFiles(ctx, aioapi.FileListRequest{Path: g.ws + "/d"})
	require.NoError(t, err)
	assert.False(t, res.Truncated, "control: under the limit")
	assert.Len(t, res.Files, 120)
}
