//go:build linux

package kube

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner"
)

// benchNode starts the node for a benchmark, with the provisioner API
// served in process over a kube backend (as TestRealNode does): its
// environment, the node, and the backend.
func benchNode(b *testing.B) (*nodeEnv, *realNode, *Backend) {
	n := startNode(b)
	applyManifests(b, n.cp)
	ctx := context.Background()
	if _, err := n.admin.AppsV1().Deployments(manifestNamespace).Patch(ctx, "sage-provisioner",
		"application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		b.Fatal(err)
	}
	e := &nodeEnv{t: b, n: n, prov: n.cp.clientset(b, provisionerToken(b, n.admin)), home: b.TempDir()}
	be, err := New(Options{Client: e.prov, Namespace: manifestNamespace, Image: nodeImage, PullPolicy: corev1.PullNever,
		PodAddress: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := provisioner.NewServer(provisioner.Options{Backend: be, BackendName: "kubernetes", Logger: quiet,
		Mounts: provisioner.MountPolicy{DropUnlisted: true}, Defaults: provisioner.Defaults{Image: nodeImage}})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	b.Cleanup(ts.Close)
	e.url = ts.URL
	return e, n, be
}

// BenchmarkRealNodeColdAcquire: a cold acquire of a new thread through
// the provisioner on the real node (Pod and Service created, scheduled,
// started, the sandbox API answering: the provider's own wait) against a
// bare Pod of the same image and probe created and polled until the
// kubelet marks it Ready (what `kubectl run` then `kubectl wait` does), in
// the same run ("x-baseline": the goal is <= 1.2). Each side deletes what
// it made at the end of its turn (one API call; the kubelet stops it in
// the background). Run with -benchtime=10x: one turn takes seconds.
func BenchmarkRealNodeColdAcquire(b *testing.B) {
	e, n, be := benchNode(b)
	ctx := context.Background()
	p := e.provider(b)
	i, j := 0, 0
	bare := func() {
		i++
		pod := be.buildPod(orchestrator.CreateRequest{SandboxID: fmt.Sprintf("bare%d", i), Image: nodeImage, Port: 8080,
			Token: "bench", Env: map[string]string{orchestrator.TokenEnv: "bench"}})
		pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts = nil, nil
		if _, err := n.admin.CoreV1().Pods(manifestNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitFor(b, "bare pod "+pod.Name+" Ready", 2*time.Minute, func() (bool, string) {
			got, err := n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return podReady(got)
		})
		if err := n.admin.CoreV1().Pods(manifestNamespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			b.Fatal(err)
		}
	}
	acquire := func() {
		j++
		sid, err := p.Acquire(ctx, fmt.Sprintf("bench-%d", j))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(ctx, sid); err != nil {
			b.Fatal(err)
		}
	}
	benchpair.Run(b, bare, acquire)
}

// BenchmarkRealNodePooledAcquire: an acquire of a new thread from a warm
// pool (pool_size 3: claim a Ready pool Pod through the provisioner,
// relabel it, open it, save the thread's state) against a cold acquire
// of a new thread (BenchmarkRealNodeColdAcquire's candidate) in the same
// run ("x-baseline": the goal is <= 0.1). Each side releases what it
// acquired; the pool refills in the background. A pooled turn that finds
// the pool empty fails the benchmark rather than be timed as a cold one.
func BenchmarkRealNodePooledAcquire(b *testing.B) {
	e, _, _ := benchNode(b)
	ctx := context.Background()
	cold := e.provider(b)
	pooled := e.pooledProvider(b, 3)
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := pooled.Shutdown(sctx); err != nil {
			b.Errorf("shutdown: %v", err)
		}
	})
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := pooled.WaitPool(wctx, 3); err != nil {
		b.Fatal(err)
	}
	i, j := 0, 0
	acquireCold := func() {
		i++
		sid, err := cold.Acquire(ctx, fmt.Sprintf("cold-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		if err := cold.Release(ctx, sid); err != nil {
			b.Fatal(err)
		}
	}
	acquirePooled := func() {
		j++
		sid, err := pooled.Acquire(ctx, fmt.Sprintf("pooled-%d", j))
		if err != nil {
			b.Fatal(err)
		}
		if info, _ := pooled.Info(sid); info.PoolSlot == "" {
			b.Fatalf("turn %d found the pool empty (%+v): the refill is slower than a cold acquire here", j, pooled.Pool())
		}
		if err := pooled.Release(ctx, sid); err != nil {
			b.Fatal(err)
		}
	}
	benchpair.Run(b, acquireCold, acquirePooled)
}
