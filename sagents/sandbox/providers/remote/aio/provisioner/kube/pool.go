package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// labelPool marks a warm-pool Pod and its Service with the pool slot id
// the Pod was created under (CreateRequest.PoolSlot). It never changes:
// the pool Service selects its Pod by it, so a claim, which relabels the
// Pod's sandbox and thread, does not move the Service off it.
const labelPool = "sage.dev/pool"

var _ orchestrator.Pooler = (*Backend)(nil)

// unclaimedPod: a pool Pod whose sandbox id is still its slot id.
func unclaimedPod(p *corev1.Pod) bool {
	slot := p.Labels[labelPool]
	return slot != "" && p.Annotations[annotationSandboxID] == slot
}

// podName is the Pod (and Service) name of a sandbox: that of its pool
// slot for a pool sandbox (claimed or not; names cannot change), else
// that of its id.
func (b *Backend) podName(info orchestrator.SandboxInfo) string {
	if info.PoolSlot != "" {
		return objectName(b.o.NamePrefix, info.PoolSlot)
	}
	return objectName(b.o.NamePrefix, info.SandboxID)
}

// Claim hands the unclaimed pool Pod of pooled.PoolSlot to thread
// threadID as sandbox sandboxID: one merge patch, carrying the Pod's
// resourceVersion, rewrites its sandbox and thread labels and
// annotations, its owner, fencing token and last activity. The API
// server applies it only to the Pod as it was read, so of two claims of
// one Pod (or a claim racing the reaper's or a sweep's delete) one
// wins; the loser gets an error and the orchestrator creates a sandbox
// instead. It refuses when another live Pod already is sandboxID (the
// thread's lock, which the orchestrator holds, keeps that from racing).
func (b *Backend) Claim(ctx context.Context, pooled orchestrator.SandboxInfo, sandboxID, threadID string) (orchestrator.SandboxInfo, error) {
	slot := pooled.PoolSlot
	if slot == "" || pooled.SandboxID != slot {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: not an unclaimed pool sandbox", pooled.SandboxID)
	}
	name := objectName(b.o.NamePrefix, slot)
	token, err := orchestrator.Fence(ctx)
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: %w", name, err)
	}
	pod, err := b.pods().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: the pool pod is gone: %w", name, fs.ErrNotExist)
	}
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: %w", name, err)
	}
	if pod.Labels[labelManagedBy] != managedBy || pod.Labels[labelPool] != slot || !unclaimedPod(pod) || !alive(pod) {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: not an unclaimed live pool pod (%s, sandbox %q): %w",
			name, podState(pod), pod.Annotations[annotationSandboxID], fs.ErrExist)
	}
	if other, err := b.findPod(ctx, sandboxID); err != nil {
		return orchestrator.SandboxInfo{}, err
	} else if other != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s as %s: pod %s already is that sandbox: %w", name, sandboxID, other.Name, fs.ErrExist)
	}
	svc, err := b.services().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: its service: %w", name, err)
	}
	if _, err := orchestrator.Fence(ctx); err != nil { // the lock may have gone while we read
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: %w", name, err)
	}
	labels := map[string]any{labelSandbox: labelFor(sandboxID), labelThread: nil}
	ann := map[string]any{annotationSandboxID: sandboxID, annotationThreadID: nil,
		annotationActivity: b.o.Now().UTC().Format(time.RFC3339Nano)}
	if threadID != "" {
		labels[labelThread], ann[annotationThreadID] = labelFor(threadID), threadID
	}
	if token > 0 {
		ann[annotationFence] = strconv.FormatInt(token, 10)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": pod.ResourceVersion,
		"labels": labels, "annotations": ann}})
	out, err := b.pods().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: changed since it was read (claimed or deleted by another): %w", name, fs.ErrExist)
	}
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: claim %s: %w", name, err)
	}
	b.o.Logger.Info("kube: claimed pool pod", "pod", name, "sandbox", sandboxID, "thread", threadID)
	info, err := b.info(out, svc)
	if err != nil {
		return orchestrator.SandboxInfo{}, err
	}
	info.Token = pooled.Token
	return info, nil
}

// ListPool lists the live, unclaimed pool Pods that have their Service
// (every owner's).
func (b *Backend) ListPool(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	return b.list(ctx, true)
}
