package aiodriver_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/sage-go/sage/internal/benchpair"
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
	run := execTrue(b, h)
	for b.Loop() {
		run()
	}
}

// execTrue is one ExecuteCommand of "true" in h.
func execTrue(b *testing.B, h *sandbox.Sandbox) func() {
	ctx := context.Background()
	return func() {
		res, err := h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
	}
}

// openRemote is a remote sandbox over the aio server at url.
func openRemote(b *testing.B, url string) *sandbox.Sandbox {
	h, err := aiodriver.Open(context.Background(), aiodriver.OpenOptions{ServerURL: url})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	return sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, h)
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
	benchExec(b, openRemote(b, url))
}

// BenchmarkRemoteExecTruePaired alternates both in one loop, the
// passthrough Handle called directly and through the remote Handle over
// the same server; x-baseline is the remote call's median over the
// direct one's.
func BenchmarkRemoteExecTruePaired(b *testing.B) {
	local, url := inProcess(b)
	benchpair.Run(b, execTrue(b, local), execTrue(b, openRemote(b, url)))
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
