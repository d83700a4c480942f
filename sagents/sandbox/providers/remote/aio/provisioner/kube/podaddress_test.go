package kube

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// giveIP plays the kubelet: once the Pod exists it gets ip.
func giveIP(t *testing.T, cs *fake.Clientset, name, ip string) chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			p.Status.PodIP, p.Status.Phase = ip, corev1.PodRunning
			if _, err := cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err == nil {
				return
			}
		}
	}()
	return done
}

// TestPodAddress: with PodAddress the URL is the Pod's IP, which Create
// waits for; Discover leaves out a Pod without one; a Pod that never gets
// one is deleted again and the error names it.
func TestPodAddress(t *testing.T) {
	b, cs, _ := newTestBackend(t, func(o *Options) { o.PodAddress = true })
	done := giveIP(t, cs, "sage-sandbox-abc", "10.244.1.7")
	info, err := b.Create(context.Background(), req("abc", "t"))
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if info.URL != "http://10.244.1.7:8080" {
		t.Fatalf("url %q, want the pod's IP", info.URL)
	}
	if got, ok, err := b.Discover(context.Background(), "abc"); err != nil || !ok || got.URL != info.URL {
		t.Fatalf("discover %+v %v %v", got, ok, err)
	}
	// No IP (the Pod was re-created and is not on the network yet):
	// Discover finds nothing usable, ListRunning leaves it out.
	p := getPod(t, cs, "sage-sandbox-abc")
	p.Status.PodIP = ""
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Discover(context.Background(), "abc"); ok || err != nil {
		t.Fatalf("discover of a pod without an IP: %v %v, want not found", ok, err)
	}
	if l, err := b.ListRunning(context.Background()); err != nil || len(l) != 0 {
		t.Fatalf("ListRunning %+v %v, want nothing", l, err)
	}

	slow, cs2, _ := newTestBackend(t, func(o *Options) { o.PodAddress = true; o.PodAddressWait = 300 * time.Millisecond })
	_, err = slow.Create(context.Background(), req("never", "t"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "sage-sandbox-never has no IP") {
		t.Fatalf("create without an IP: %v, want a deadline naming the pod", err)
	}
	if _, err := cs2.CoreV1().Pods(ns).Get(context.Background(), "sage-sandbox-never", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod left behind after the failed create: %v", err)
	}

	// Control: without PodAddress the URL is the Service's, at once.
	plain, _, _ := newTestBackend(t, nil)
	if info, err := plain.Create(context.Background(), req("abc", "t")); err != nil || !strings.Contains(info.URL, ".svc.cluster.local") {
		t.Fatalf("service URL %q, %v", info.URL, err)
	}
}

// TestPodAddressPodGone: a Pod deleted while Create waits ends the wait.
func TestPodAddressPodGone(t *testing.T) {
	b, cs, _ := newTestBackend(t, func(o *Options) { o.PodAddress = true })
	go func() {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if cs.CoreV1().Pods(ns).Delete(context.Background(), "sage-sandbox-gone", metav1.DeleteOptions{}) == nil {
				return
			}
		}
	}()
	if _, err := b.Create(context.Background(), req("gone", "t")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create of a pod deleted meanwhile: %v, want fs.ErrNotExist", err)
	}
}

func TestRuntimeClass(t *testing.T) {
	b, cs, _ := newTestBackend(t, func(o *Options) { o.RuntimeClass = "gvisor" })
	if _, err := b.Create(context.Background(), req("abc", "t")); err != nil {
		t.Fatal(err)
	}
	if rc := getPod(t, cs, "sage-sandbox-abc").Spec.RuntimeClassName; rc == nil || *rc != "gvisor" {
		t.Fatalf("runtimeClassName %v, want gvisor", rc)
	}
	plain, cs2, _ := newTestBackend(t, nil)
	if _, err := plain.Create(context.Background(), req("abc", "t")); err != nil {
		t.Fatal(err)
	}
	if rc := getPod(t, cs2, "sage-sandbox-abc").Spec.RuntimeClassName; rc != nil {
		t.Fatalf("runtimeClassName %q without RuntimeClass", *rc)
	}
}

// TestThreadDirsWithoutMounts: a sandbox whose request mounts no thread
// directory (the provisioner dropped or refused them) gets an emptyDir for
// each, which its non-root user can write; a mount that covers them
// replaces them.
func TestThreadDirsWithoutMounts(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	r := req("abc", "t")
	r.Mounts = nil
	if _, err := b.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, "sage-sandbox-abc")
	var got []string
	for i, m := range p.Spec.Containers[0].VolumeMounts {
		if v := p.Spec.Volumes[i]; v.Name != m.Name || v.EmptyDir == nil || m.ReadOnly {
			t.Errorf("volume %+v for mount %+v, want a writable emptyDir", v, m)
		}
		got = append(got, m.MountPath)
	}
	if want := []string{"/mnt/user-data/workspace", "/mnt/user-data/uploads", "/mnt/user-data/outputs"}; !slices.Equal(got, want) {
		t.Fatalf("mounts %v, want %v", got, want)
	}
	// Control: the request's mount of /mnt/user-data (req's default) covers all three.
	b2, cs2, _ := newTestBackend(t, nil)
	if _, err := b2.Create(context.Background(), req("abc", "t")); err != nil {
		t.Fatal(err)
	}
	for _, v := range getPod(t, cs2, "sage-sandbox-abc").Spec.Volumes {
		if v.EmptyDir != nil {
			t.Fatalf("emptyDir %s beside a mount of /mnt/user-data", v.Name)
		}
	}
}
