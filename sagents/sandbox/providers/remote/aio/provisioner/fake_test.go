package provisioner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// memBackend is an in-memory orchestrator.Backend.
type memBackend struct {
	mu        sync.Mutex
	boxes     map[string]orchestrator.SandboxInfo
	reqs      []orchestrator.CreateRequest
	destroyed []orchestrator.SandboxInfo
	createErr error
	checkErr  error
}

func newMem() *memBackend { return &memBackend{boxes: map[string]orchestrator.SandboxInfo{}} }

func (m *memBackend) Create(_ context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if m.createErr != nil {
		return orchestrator.SandboxInfo{}, m.createErr
	}
	if info, ok := m.boxes[req.SandboxID]; ok {
		return info, nil
	}
	info := orchestrator.SandboxInfo{SandboxID: req.SandboxID, ThreadID: req.ThreadID, Owner: req.Owner,
		URL: fmt.Sprintf("http://sandbox-%s:%d", req.SandboxID, req.Port), ContainerName: "c-" + req.SandboxID,
		ContainerID: "id-" + req.SandboxID, CreatedAt: time.Unix(1700000000, 0).UTC()}
	m.boxes[req.SandboxID] = info
	return info, nil
}

func (m *memBackend) Destroy(_ context.Context, info orchestrator.SandboxInfo) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.destroyed = append(m.destroyed, info)
	delete(m.boxes, info.SandboxID)
	return nil
}

func (m *memBackend) IsAlive(_ context.Context, info orchestrator.SandboxInfo) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.boxes[info.SandboxID]
	return ok, nil
}

func (m *memBackend) Discover(_ context.Context, id string) (orchestrator.SandboxInfo, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.boxes[id]
	return info, ok, nil
}

func (m *memBackend) ListRunning(context.Context) ([]orchestrator.SandboxInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []orchestrator.SandboxInfo
	for _, v := range m.boxes {
		out = append(out, v)
	}
	return out, nil
}

func (m *memBackend) Check(context.Context) error { return m.checkErr }

var errBoom = errors.New("boom")

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer serves a Server over mem on 127.0.0.1 and returns a client.
func startServer(t *testing.T, mem *memBackend, mutate func(*Options)) (*Client, *httptest.Server) {
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
	c, err := NewClient(ts.URL, "k3y")
	if err != nil {
		t.Fatal(err)
	}
	return c, ts
}
