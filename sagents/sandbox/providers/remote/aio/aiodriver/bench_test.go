package aiodriver_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aiodriver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
)

// inProcess serves a passthrough sandbox with aioserver on a loopback
// httptest server (the same handler `sage sandboxd` runs).
func inProcess(b testing.TB) (local *sandbox.Sandbox, url string) {
	b.Helper()
	b.Setenv("SAGE_HOME", b.TempDir())
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	srv, err := aioserver.New(aioserver.Options{Handle: h})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(ts.Close)
	return h, ts.URL
}

func benchExec(b *testing.B, h *sandbox.Sandbox) {
	ctx := context.Background()
	for b.Loop() {
		res, err := h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkPassthroughExecTrue is the baseline: the same passthrough
// Handle that sandboxd wraps, called directly.
func BenchmarkPassthroughExecTrue(b *testing.B) {
	h, _ := inProcess(b)
	benchExec(b, h)
}

// BenchmarkRemoteExecTrue runs `true` through the remote Handle, over
// loopback HTTP, through aioserver, into the passthrough Handle.
func BenchmarkRemoteExecTrue(b *testing.B) {
	_, url := inProcess(b)
	h, err := aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	benchExec(b, sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, h))
}

// BenchmarkRemoteHTTPOverhead is one no-op round trip (GET /v1/sandbox)
// on a kept-alive connection: the per-call HTTP cost.
func BenchmarkRemoteHTTPOverhead(b *testing.B) {
	_, url := inProcess(b)
	c, err := aioapi.NewClient(url, aioapi.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Sandbox(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
