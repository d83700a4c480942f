package provisioner

import (
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

var errBoom = errors.New("boom")

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer serves a Server over mem on 127.0.0.1 and returns a client.
func startServer(t *testing.T, mem *orchestratortest.Backend, mutate func(*Options)) (*apiClient, *httptest.Server) {
	t.Helper()
	opts := Options{Backend: mem, BackendName: "mem", APIKey: "k3y", Logger: quietLogger(),
		Mounts:   MountPolicy{Prefixes: []string{"/srv/sage"}},
		Defaults: Defaults{Image: "img:1", Port: 9090, MemoryMB: 512, CPUs: 0.5}}
	if mutate != nil {
		mutate(&opts)
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := newAPIClient(ts.URL, "k3y")
	if err != nil {
		t.Fatal(err)
	}
	return c, ts
}
