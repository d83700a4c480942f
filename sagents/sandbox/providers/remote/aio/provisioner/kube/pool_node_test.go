//go:build linux

package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// pooledProvider is an aio provider in remote mode on the provisioner
// with a warm pool (pool_size), as a user configures it. The caller
// shuts it down.
func (e *nodeEnv) pooledProvider(t testing.TB, size int) *orchestrator.Provider {
	t.Helper()
	p, err := orchestrator.ProviderFromConfig(sandbox.RemoteConfig{Provider: "aio", ProviderConfig: map[string]any{
		orchestrator.KeyProvisionerURL: e.url, orchestrator.KeyHome: e.home, orchestrator.KeyReadyTimeout: "3m",
		orchestrator.KeyPoolSize: size}},
		orchestrator.ProviderOptions{LivenessInterval: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// poolPods lists the pool Pods (claimed or not) that are not being
// deleted.
func (e *nodeEnv) poolPods(t testing.TB) []corev1.Pod {
	t.Helper()
	l, err := e.n.admin.CoreV1().Pods(manifestNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: selectorAll + "," + labelPool})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// testNodeWarmPool: two providers with pool_size 2 on the real node
// (through the provisioner API): their pools fill with Ready, unclaimed
// Pods; an acquire of a new thread claims one (the thread's Pod is a pool
// Pod, relabelled, running commands and files) and the pool refills in
// the background; 16 goroutines over both providers acquiring 4 threads
// get one Pod per thread; Shutdown of both deletes the pools' unclaimed
// Pods and the claimed ones (shutdown_policy destroy), and the garbage
// collector their Services.
func testNodeWarmPool(t *testing.T, e *nodeEnv, st *stepState) {
	ctx := context.Background()
	p1, p2 := e.pooledProvider(t, 2), e.pooledProvider(t, 2)
	shut := func() {
		for _, p := range []*orchestrator.Provider{p1, p2} {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			if err := p.Shutdown(sctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			cancel()
		}
	}
	defer shut()
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	t0 := time.Now()
	for _, p := range []*orchestrator.Provider{p1, p2} {
		if err := p.WaitPool(wctx, 2); err != nil {
			t.Fatalf("warm pool: %v (%+v)\n%s", err, p.Pool(), e.n.logTails())
		}
	}
	t.Logf("two pools of 2 filled in %s", time.Since(t0).Round(time.Millisecond))
	pods := e.poolPods(t)
	if len(pods) != 4 {
		t.Fatalf("%d pool pods, want 4: %v", len(pods), podNames(pods))
	}
	for _, p := range pods {
		if !unclaimedPod(&p) {
			t.Fatalf("pool pod %s is claimed already: %v", p.Name, p.Annotations)
		}
		// Ready by the kubelet's probe (the pool waited for the API, which
		// the probe sees a period later).
		waitFor(t, "pool pod "+p.Name+" Ready by its probe", 2*time.Minute, func() (bool, string) {
			got, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return podReady(got)
		})
	}

	t0 = time.Now()
	sid, err := p1.Acquire(ctx, "thread-pool")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pooled acquire of a new thread: %s", time.Since(t0).Round(time.Millisecond))
	info, _ := p1.Info(sid)
	pod := e.onePod(t, "thread-pool")
	if info.PoolSlot == "" || pod.Labels[labelPool] != info.PoolSlot || pod.Annotations[annotationSandboxID] != sid ||
		pod.Annotations[annotationThreadID] != "thread-pool" {
		t.Fatalf("thread-pool's sandbox %+v, pod %s labels %v annotations %v: want a claimed pool pod", info, pod.Name, pod.Labels, pod.Annotations)
	}
	sb, _ := p1.Get(sid)
	if res, err := sb.ExecuteCommand(ctx, "hostname; id -u", sandbox.ExecOptions{}); err != nil ||
		!slices.Equal(strings.Fields(res.Stdout), []string{pod.Name, "1000"}) {
		t.Fatalf("command in the claimed pod: %+v, %v", res, err)
	}
	if err := sb.WriteFile(ctx, nodeFile, []byte("pooled"), sandbox.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p1.WaitPool(wctx, 2); err != nil {
		t.Fatalf("refill after the claim: %v", err)
	}
	// Another provider finds the thread's claimed Pod (not its own pool).
	if got, err := p2.Acquire(ctx, "thread-pool"); err != nil || got != sid {
		t.Fatalf("second provider's acquire of thread-pool: %s, %v; want %s", got, err, sid)
	}
	sb2, _ := p2.Get(sid)
	if data, err := sb2.ReadFile(ctx, nodeFile); err != nil || string(data) != "pooled" {
		t.Fatalf("second provider reads %q, %v", data, err)
	}

	// Concurrency: 16 goroutines, 4 threads, both providers.
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]map[string]bool{}
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := []*orchestrator.Provider{p1, p2}[g%2]
			thread := fmt.Sprintf("thread-pc%d", g%4)
			sid, err := p.Acquire(ctx, thread)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("acquire %s: %v", thread, err)
				return
			}
			if got[thread] == nil {
				got[thread] = map[string]bool{}
			}
			got[thread][sid] = true
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for g := range 4 {
		thread := fmt.Sprintf("thread-pc%d", g)
		if len(got[thread]) != 1 {
			t.Errorf("thread %s got sandboxes %v, want one", thread, got[thread])
		}
		e.onePod(t, thread)
	}

	shut()
	waitFor(t, "every pool pod deleted after both providers' shutdown", 2*time.Minute, func() (bool, string) {
		left := e.poolPods(t)
		return len(left) == 0, fmt.Sprint(podNames(left))
	})
	waitFor(t, "the pool pods' services removed", 2*time.Minute, func() (bool, string) {
		l, err := e.n.admin.CoreV1().Services(manifestNamespace).List(ctx, metav1.ListOptions{LabelSelector: selectorAll + "," + labelPool})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 0, fmt.Sprintf("%d services", len(l.Items))
	})
	_ = st
}
