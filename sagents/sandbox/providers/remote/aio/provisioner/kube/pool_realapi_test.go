//go:build linux

package kube

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner"
)

// testPoolClaimRace: pool Pods on the real API server claimed by 64
// goroutines at once, through two backends (two provisioner replicas)
// and a provisioner server over a third: each Pod goes to exactly one
// claimer (the claim's resourceVersion precondition), the winner's
// sandbox is found by its id and no longer listed in the pool, a claim
// under an id another Pod already is is refused, and destroying a
// claimed sandbox removes the pool Pod and its Service.
func testPoolClaimRace(t *testing.T, e *realEnv) {
	ctx := context.Background()
	replicas := []*Backend{e.backend(t, nil), e.backend(t, nil), e.backend(t, nil)}
	srv, err := provisioner.NewServer(provisioner.Options{Backend: replicas[2], BackendName: "kubernetes", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	b, err := orchestrator.NewBackend("provisioner", map[string]any{orchestrator.KeyProvisionerURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	client, ok := b.(interface {
		orchestrator.Backend
		orchestrator.Pooler
	})
	if !ok {
		t.Fatalf("the provisioner's client backend %T is no orchestrator.Pooler", b)
	}
	claimers := []orchestrator.Pooler{replicas[0], replicas[1], client}

	const slots, goroutines = 8, 64
	var pooled []orchestrator.SandboxInfo
	for i := range slots {
		slot := fmt.Sprintf("pool-race%02d", i)
		// Through the provisioner API, as the orchestrator's pool fills.
		info, err := client.Create(ctx, orchestrator.CreateRequest{SandboxID: slot, PoolSlot: slot, Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		if info.PoolSlot != slot {
			t.Fatalf("created pool sandbox %+v: PoolSlot %q, want %q", info, info.PoolSlot, slot)
		}
		pooled = append(pooled, info)
	}
	listed, err := client.ListPool(ctx)
	if err != nil || len(listed) != slots {
		t.Fatalf("ListPool: %d, %v; want %d", len(listed), err, slots)
	}
	running, err := replicas[0].ListRunning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range running {
		if r.PoolSlot != "" {
			t.Fatalf("ListRunning lists unclaimed pool pod %+v", r)
		}
	}

	var mu sync.Mutex
	won := map[string][]string{} // slot -> sandbox ids that claimed it
	refused := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			slot := pooled[g%slots]
			sid, thread := fmt.Sprintf("claim%02d", g), fmt.Sprintf("thread%02d", g)
			info, err := claimers[g%len(claimers)].Claim(ctx, slot, sid, thread)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			if info.SandboxID != sid || info.ThreadID != thread || info.PoolSlot != slot.PoolSlot {
				t.Errorf("claim of %s as %s: got %+v", slot.PoolSlot, sid, info)
			}
			won[slot.PoolSlot] = append(won[slot.PoolSlot], sid)
		}()
	}
	close(start)
	wg.Wait()
	if refused != goroutines-slots {
		t.Errorf("%d claims refused, want %d", refused, goroutines-slots)
	}
	for _, slot := range pooled {
		w := won[slot.PoolSlot]
		if len(w) != 1 {
			t.Fatalf("pool pod %s claimed by %v, want exactly one", slot.PoolSlot, w)
		}
		pod, err := e.pod(t, slot.ContainerName)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Annotations[annotationSandboxID] != w[0] || pod.Labels[labelSandbox] != w[0] ||
			pod.Labels[labelThread] != "thread"+strings.TrimPrefix(w[0], "claim") || pod.Labels[labelPool] != slot.PoolSlot {
			t.Errorf("pod %s after its claim by %s: labels %v annotations %v", pod.Name, w[0], pod.Labels, pod.Annotations)
		}
		found, ok, err := client.Discover(ctx, w[0])
		if err != nil || !ok || found.ContainerName != slot.ContainerName || found.PoolSlot != slot.PoolSlot {
			t.Errorf("Discover(%s): %+v %v %v; want pool pod %s", w[0], found, ok, err, slot.ContainerName)
		}
		if _, ok, _ := client.Discover(ctx, slot.PoolSlot); ok {
			t.Errorf("Discover(%s) still finds the claimed slot under its own id", slot.PoolSlot)
		}
	}
	if listed, err := client.ListPool(ctx); err != nil || len(listed) != 0 {
		t.Fatalf("ListPool after the claims: %v, %v; want none", listed, err)
	}

	// An id another Pod already is: refused, the pool Pod stays unclaimed.
	spare, err := replicas[0].Create(ctx, orchestrator.CreateRequest{SandboxID: "pool-spare", PoolSlot: "pool-spare"})
	if err != nil {
		t.Fatal(err)
	}
	taken := won[pooled[0].PoolSlot][0]
	if _, err := client.Claim(ctx, spare, taken, "thread-x"); err == nil {
		t.Fatalf("claim of %s as %s (pod %s already is it) succeeded", spare.PoolSlot, taken, pooled[0].ContainerName)
	}
	if l, err := replicas[1].ListPool(ctx); err != nil || len(l) != 1 || l[0].PoolSlot != "pool-spare" {
		t.Fatalf("ListPool after the refused claim: %v, %v", l, err)
	}

	// Destroy through the provisioner by the claimed id: the pool Pod and
	// its Service go.
	for _, slot := range append(pooled, spare) {
		id := slot.PoolSlot
		if w := won[slot.PoolSlot]; len(w) == 1 {
			id = w[0]
		}
		if err := client.Destroy(ctx, orchestrator.SandboxInfo{SandboxID: id}); err != nil {
			t.Fatalf("destroy %s: %v", id, err)
		}
		e.gone(t, slot.ContainerName)
	}
	l, err := e.admin.CoreV1().Pods(manifestNamespace).List(ctx, metav1.ListOptions{LabelSelector: labelPool})
	if err != nil || len(l.Items) != 0 {
		t.Fatalf("pool pods left: %d, %v", len(l.Items), err)
	}
}
