package provisioner

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator/orchestratortest"
)

// fencingBackend is the in-memory backend that checks fencing tokens as
// the kube backend does: its sandboxes carry the newest token that
// created or adopted them.
type fencingBackend struct {
	*orchestratortest.Backend
	mu     sync.Mutex
	fences map[string]int64
}

func (b *fencingBackend) check(ctx context.Context, id string) (int64, error) {
	token, err := orchestrator.Fence(ctx)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return token, orchestrator.CheckFence(token, b.fences[id], "sandbox "+id)
}

func (b *fencingBackend) Create(ctx context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	token, err := b.check(ctx, req.SandboxID)
	if err != nil {
		return orchestrator.SandboxInfo{}, err
	}
	b.mu.Lock()
	b.fences[req.SandboxID] = token
	b.mu.Unlock()
	info, err := b.Backend.Create(ctx, req)
	info.Fence = token
	return info, err
}

func (b *fencingBackend) Destroy(ctx context.Context, info orchestrator.SandboxInfo) error {
	if _, err := b.check(ctx, info.SandboxID); err != nil {
		return err
	}
	return b.Backend.Destroy(ctx, info)
}

func (b *fencingBackend) Adopt(ctx context.Context, info orchestrator.SandboxInfo) (orchestrator.SandboxInfo, error) {
	token, err := b.check(ctx, info.SandboxID)
	if err != nil {
		return info, err
	}
	b.mu.Lock()
	b.fences[info.SandboxID] = token
	b.mu.Unlock()
	info.Fence = token
	return info, nil
}

// Issue 35, item 4: the client's fencing token reaches the server's
// backend on create, adopt and destroy (body, adopt call, X-Sage-Fence),
// and a stale one comes back as ErrStaleFence.
func TestFenceCrossesTheProvisioner(t *testing.T) {
	fb := &fencingBackend{Backend: &orchestratortest.Backend{}, fences: map[string]int64{}}
	s, err := NewServer(Options{Backend: fb, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := newAPIClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := c.Create(orchestrator.WithFence(ctx, 10), orchestrator.CreateRequest{SandboxID: "f1", ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Fence != 10 {
		t.Fatalf("the sandbox carries token %d, want 10", info.Fence)
	}
	if err := c.Destroy(orchestrator.WithFence(ctx, 5), info); !errors.Is(err, orchestrator.ErrStaleFence) {
		t.Fatalf("destroy under a stale token: %v, want ErrStaleFence", err)
	}
	if info, err = c.Adopt(orchestrator.WithFence(ctx, 20), info); err != nil || info.Fence != 20 {
		t.Fatalf("adopt under a newer token: %v (fence %d)", err, info.Fence)
	}
	if err := c.Destroy(orchestrator.WithFence(ctx, 10), info); !errors.Is(err, orchestrator.ErrStaleFence) {
		t.Fatalf("the creator's token after the adoption: %v, want ErrStaleFence", err)
	}
	if err := c.Destroy(orchestrator.WithFence(ctx, 20), info); err != nil {
		t.Fatalf("control: the newest holder destroys: %v", err)
	}
	if fb.Running() != 0 {
		t.Fatal("the sandbox survived its destroy")
	}
}
