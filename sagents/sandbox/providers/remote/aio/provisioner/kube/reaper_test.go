package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReaperIdleTTL(t *testing.T) {
	b, cs, clock := newTestBackend(t, func(o *Options) { o.TouchEvery = time.Second })
	ctx := context.Background()
	for _, id := range []string{"idle", "busy"} {
		if _, err := b.Create(ctx, req(id, "t-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	ttl := ReapOptions{TTL: 10 * time.Minute}
	clock.Add(6 * time.Minute)
	if _, ok, err := b.Discover(ctx, "busy"); !ok || err != nil { // activity
		t.Fatalf("discover: %v %v", ok, err)
	}
	if reaped, err := b.Reap(ctx, ttl); err != nil || len(reaped) != 0 {
		t.Fatalf("early reap: %v %v", reaped, err)
	}
	clock.Add(5 * time.Minute) // idle: 11 min, busy: 5 min
	reaped, err := b.Reap(ctx, ttl)
	if err != nil || len(reaped) != 1 || reaped[0] != "sage-sandbox-idle" {
		t.Fatalf("reap: %v %v", reaped, err)
	}
	for _, c := range []struct {
		name string
		gone bool
	}{{"sage-sandbox-idle", true}, {"sage-sandbox-busy", false}} {
		_, perr := cs.CoreV1().Pods(ns).Get(ctx, c.name, metav1.GetOptions{})
		_, serr := cs.CoreV1().Services(ns).Get(ctx, c.name, metav1.GetOptions{})
		if apierrors.IsNotFound(perr) != c.gone || apierrors.IsNotFound(serr) != c.gone {
			t.Fatalf("%s: pod %v service %v", c.name, perr, serr)
		}
	}
	// TTL 0 reaps nothing that runs.
	clock.Add(24 * time.Hour)
	if reaped, _ := b.Reap(ctx, ReapOptions{}); len(reaped) != 0 {
		t.Fatalf("ttl 0 reaped %v", reaped)
	}
}

func TestReaperTouchThrottled(t *testing.T) {
	b, cs, clock := newTestBackend(t, nil) // TouchEvery 30 s
	ctx := context.Background()
	if _, err := b.Create(ctx, req("abc", "t")); err != nil {
		t.Fatal(err)
	}
	before := getPod(t, cs, "sage-sandbox-abc").Annotations[annotationActivity]
	clock.Add(10 * time.Second)
	b.Discover(ctx, "abc")
	if got := getPod(t, cs, "sage-sandbox-abc").Annotations[annotationActivity]; got != before {
		t.Fatalf("touched within TouchEvery: %s -> %s", before, got)
	}
	clock.Add(30 * time.Second)
	b.Discover(ctx, "abc")
	got := getPod(t, cs, "sage-sandbox-abc").Annotations[annotationActivity]
	if want := clock.Now().UTC().Format(time.RFC3339Nano); got != want {
		t.Fatalf("activity %s, want %s", got, want)
	}
}

func TestReaperFailedPodsAndMissingAnnotation(t *testing.T) {
	b, cs, clock := newTestBackend(t, nil)
	ctx := context.Background()
	for _, id := range []string{"dead", "legacy"} {
		if _, err := b.Create(ctx, req(id, "t")); err != nil {
			t.Fatal(err)
		}
	}
	setPhase(t, cs, "sage-sandbox-dead", corev1.PodFailed)
	// Without the annotation the creation time counts.
	p := getPod(t, cs, "sage-sandbox-legacy")
	delete(p.Annotations, annotationActivity)
	p.CreationTimestamp = metav1.NewTime(clock.Now().Add(-time.Hour))
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reaped, err := b.Reap(ctx, ReapOptions{TTL: 30 * time.Minute})
	if err != nil || len(reaped) != 2 {
		t.Fatalf("reaped %v %v", reaped, err)
	}
}

func TestRunReaperStops(t *testing.T) {
	b, _, _ := newTestBackend(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.RunReaper(ctx, ReapOptions{TTL: time.Minute, Interval: time.Millisecond}); close(done) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunReaper did not stop")
	}
}
