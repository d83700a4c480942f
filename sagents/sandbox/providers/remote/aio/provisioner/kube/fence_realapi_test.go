//go:build linux

package kube

import (
	"context"
	"errors"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// testFence (issue 35, item 4): the Pod carries the fencing token of the
// lock it was created under; a former holder's destroy is refused; an
// adoption stamps the adopter's token (under the Pod's resourceVersion),
// after which even the creator's token, older now, cannot delete it,
// which labels on a Docker container cannot do; the newest holder can.
func testFence(t *testing.T, e *realEnv) {
	ctx := context.Background()
	b := e.backend(t, nil)
	info, err := b.Create(orchestrator.WithFence(ctx, 10), orchestrator.CreateRequest{SandboxID: "fence1", ThreadID: "t-fence"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Fence != 10 {
		t.Fatalf("created under token 10, the pod carries %d", info.Fence)
	}
	if err := b.Destroy(orchestrator.WithFence(ctx, 5), info); !errors.Is(err, orchestrator.ErrStaleFence) {
		t.Fatalf("destroy under an older token: %v, want ErrStaleFence", err)
	}
	if _, err := b.Adopt(orchestrator.WithFence(ctx, 20), info); err != nil {
		t.Fatalf("adopt under a newer token: %v", err)
	}
	p, err := e.pod(t, info.ContainerName)
	if err != nil || p.Annotations[annotationFence] != "20" {
		t.Fatalf("after the adoption the pod carries %q (%v), want 20", p.Annotations[annotationFence], err)
	}
	if err := b.Destroy(orchestrator.WithFence(ctx, 10), info); !errors.Is(err, orchestrator.ErrStaleFence) {
		t.Fatalf("the creator's token after an adoption: %v, want ErrStaleFence", err)
	}
	if _, err := b.Adopt(orchestrator.WithFence(ctx, 15), info); !errors.Is(err, orchestrator.ErrStaleFence) {
		t.Fatalf("adopt under an older token: %v, want ErrStaleFence", err)
	}
	if err := b.Destroy(orchestrator.WithFence(ctx, 20), info); err != nil {
		t.Fatalf("control: the newest holder destroys: %v", err)
	}
	e.gone(t, info.ContainerName)
}
