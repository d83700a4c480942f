package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// touch stamps the Pod's activity annotation unless it is fresher than
// TouchEvery. Failures are logged: activity is advisory.
func (b *Backend) touch(ctx context.Context, pod *corev1.Pod) {
	now := b.o.Now()
	if last, ok := lastActivity(pod); ok && now.Sub(last) < b.o.TouchEvery {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{annotationActivity: now.UTC().Format(time.RFC3339Nano)}}})
	_, err := b.pods().Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		b.o.Logger.Warn("kube: recording activity failed", "pod", pod.Name, "err", err)
	}
}

// lastActivity is the annotation's time, else the Pod's creation time.
func lastActivity(pod *corev1.Pod) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, pod.Annotations[annotationActivity]); err == nil {
		return t, true
	}
	return pod.CreationTimestamp.Time, !pod.CreationTimestamp.IsZero()
}

// ReapOptions configure Reap and RunReaper.
type ReapOptions struct {
	// TTL is how long a sandbox may go without activity; 0 reaps only
	// failed and finished Pods.
	TTL time.Duration
	// Interval is RunReaper's scan period; default 1 minute.
	Interval time.Duration
}

// Reap makes one pass: it deletes the sandboxes idle past o.TTL and those
// whose Pod has failed or finished, and returns their names. A sandbox
// touched between the scan and the delete survives (the delete carries the
// Pod's resourceVersion as a precondition).
func (b *Backend) Reap(ctx context.Context, o ReapOptions) ([]string, error) {
	pods, err := b.pods().List(ctx, metav1.ListOptions{LabelSelector: selectorAll})
	if err != nil {
		return nil, fmt.Errorf("kube: reaper: list pods: %w", err)
	}
	now := b.o.Now()
	var reaped []string
	for i := range pods.Items {
		p := &pods.Items[i]
		why := reapReason(p, now, o.TTL)
		if why == "" {
			continue
		}
		pre := &metav1.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion}
		err := b.deleteObjects(ctx, p.Name, pre)
		if apierrors.IsConflict(err) {
			continue // touched or replaced since the scan
		}
		if err != nil {
			return reaped, fmt.Errorf("kube: reaper: %w", err)
		}
		b.o.Logger.Info("kube: reaped sandbox", "pod", p.Name, "sandbox", p.Annotations[annotationSandboxID], "reason", why)
		reaped = append(reaped, p.Name)
	}
	return reaped, nil
}

func reapReason(p *corev1.Pod, now time.Time, ttl time.Duration) string {
	switch {
	case p.DeletionTimestamp != nil:
		return ""
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return "pod " + string(p.Status.Phase)
	}
	last, ok := lastActivity(p)
	if ttl > 0 && ok && now.Sub(last) > ttl {
		return fmt.Sprintf("idle %s (ttl %s)", now.Sub(last).Round(time.Second), ttl)
	}
	return ""
}

// RunReaper calls Reap every o.Interval until ctx is done, logging
// failures.
func (b *Backend) RunReaper(ctx context.Context, o ReapOptions) {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		if _, err := b.Reap(ctx, o); err != nil && ctx.Err() == nil {
			b.o.Logger.Error("kube: reaper pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
