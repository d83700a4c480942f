package kube

import (
	"context"
	"encoding/json"
	"errors"
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

// Backend runs sandboxes as Pods and Services. It implements orchestrator.Backend
// and is safe for concurrent use.
type Backend struct {
	o   Options
	res resources
}

var (
	_ orchestrator.Backend       = (*Backend)(nil)
	_ orchestrator.StoppedLister = (*Backend)(nil)
)

// New checks opts and returns the backend.
func New(opts Options) (*Backend, error) {
	opts.setDefaults()
	res, err := opts.check()
	if err != nil {
		return nil, err
	}
	return &Backend{o: opts, res: res}, nil
}

func (b *Backend) pods() podClient         { return b.o.Client.CoreV1().Pods(b.o.Namespace) }
func (b *Backend) services() serviceClient { return b.o.Client.CoreV1().Services(b.o.Namespace) }

// Create makes the Pod and its Service, adopting either when it already
// exists and is ours. It does not wait for the Pod to be ready; the
// provider polls the URL. If the Service cannot be made, a Pod created by
// this call is deleted again.
func (b *Backend) Create(ctx context.Context, req orchestrator.CreateRequest) (orchestrator.SandboxInfo, error) {
	if req.Image == "" {
		req.Image = b.o.Image
	}
	if req.Port == 0 {
		req.Port = b.o.Port
	}
	token, err := orchestrator.Fence(ctx)
	if err != nil {
		return orchestrator.SandboxInfo{}, fmt.Errorf("kube: create %s: %w", req.SandboxID, err)
	}
	pod, created, err := b.createPod(ctx, req, token)
	if err != nil {
		return orchestrator.SandboxInfo{}, err
	}
	svc, err := b.createService(ctx, req, pod)
	if err == nil && b.o.PodAddress {
		pod, err = b.waitPodIP(ctx, pod)
	}
	if err != nil {
		if created {
			b.deleteQuietly(ctx, pod.Name)
		}
		return orchestrator.SandboxInfo{}, err
	}
	return b.info(pod, svc)
}

// errNoPodIP: with PodAddress, a Pod that has no IP yet has no URL.
var errNoPodIP = errors.New("no pod IP")

// podIPPoll is how often waitPodIP reads the Pod.
var podIPPoll = 200 * time.Millisecond

// waitPodIP reads pod until it has an IP, within ctx and
// PodAddressWait; a Pod that fails, finishes or is deleted meanwhile
// ends the wait with an error.
func (b *Backend) waitPodIP(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.PodAddressWait)
	defer cancel()
	tick := time.NewTicker(podIPPoll)
	defer tick.Stop()
	for pod.Status.PodIP == "" {
		select {
		case <-ctx.Done():
			return pod, fmt.Errorf("kube: pod %s has no IP after %s (%s; see kubectl describe pod %s -n %s): %w",
				pod.Name, b.o.PodAddressWait, podState(pod), pod.Name, b.o.Namespace, ctx.Err())
		case <-tick.C:
		}
		p, err := b.pods().Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return pod, fmt.Errorf("kube: pod %s was deleted before it had an IP: %w", pod.Name, fs.ErrNotExist)
		case err != nil && ctx.Err() == nil:
			return pod, fmt.Errorf("kube: get pod %s: %w", pod.Name, err)
		case err == nil && p.UID != pod.UID:
			return pod, fmt.Errorf("kube: pod %s was replaced before it had an IP: %w", pod.Name, fs.ErrNotExist)
		case err == nil && !alive(p):
			return p, fmt.Errorf("kube: pod %s is %s and has no IP", pod.Name, podState(p))
		case err == nil:
			pod = p
		}
	}
	return pod, nil
}

func (b *Backend) createPod(ctx context.Context, req orchestrator.CreateRequest, token int64) (*corev1.Pod, bool, error) {
	want := b.buildPod(req)
	if token > 0 {
		want.Annotations[annotationFence] = strconv.FormatInt(token, 10)
	}
	pod, err := b.pods().Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		b.o.Logger.Info("kube: created pod", "pod", pod.Name, "sandbox", req.SandboxID)
		return pod, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("kube: create pod %s: %w", want.Name, err)
	}
	pod, err = b.pods().Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("kube: pod %s exists but cannot be read: %w", want.Name, err)
	}
	if err := b.adoptable(&pod.ObjectMeta, req.SandboxID); err != nil {
		return nil, false, err
	}
	if !alive(pod) {
		return nil, false, fmt.Errorf("kube: pod %s exists but is %s: %w (the reaper removes it; retry)", pod.Name, podState(pod), fs.ErrExist)
	}
	if pod, err = b.stampFence(ctx, pod, token); err != nil {
		return nil, false, err
	}
	b.o.Logger.Info("kube: adopted existing pod", "pod", pod.Name, "sandbox", req.SandboxID)
	return pod, false, nil
}

// fenceOf reads a Pod's fencing annotation (0: none).
func fenceOf(pod *corev1.Pod) int64 {
	n, _ := strconv.ParseInt(pod.Annotations[annotationFence], 10, 64)
	return n
}

// stampFence refuses a Pod that carries a newer token than the caller's,
// and stamps the caller's token on one that carries an older one, with
// the Pod's resourceVersion in the patch: if anyone changed the Pod since
// it was read, the API server refuses (409) and nothing is stamped.
func (b *Backend) stampFence(ctx context.Context, pod *corev1.Pod, token int64) (*corev1.Pod, error) {
	if err := orchestrator.CheckFence(token, fenceOf(pod), "pod "+pod.Name); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	if token == 0 || token == fenceOf(pod) {
		return pod, nil
	}
	if _, err := orchestrator.Fence(ctx); err != nil {
		return nil, fmt.Errorf("kube: adopt %s: %w", pod.Name, err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": pod.ResourceVersion,
		"annotations": map[string]string{annotationFence: strconv.FormatInt(token, 10)}}})
	out, err := b.pods().Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("kube: adopt %s: changed while it was adopted: %w", pod.Name, orchestrator.ErrStaleFence)
	}
	if err != nil {
		return nil, fmt.Errorf("kube: adopt %s: %w", pod.Name, err)
	}
	return out, nil
}

// Adopt implements orchestrator.Adopter: the caller's fencing token goes
// on the sandbox's Pod (refused if the Pod carries a newer one).
func (b *Backend) Adopt(ctx context.Context, info orchestrator.SandboxInfo) (orchestrator.SandboxInfo, error) {
	token, err := orchestrator.Fence(ctx)
	if err != nil || token == 0 {
		return info, err
	}
	pod, err := b.findPod(ctx, info.SandboxID)
	if err != nil {
		return info, err
	}
	if pod == nil {
		return info, fmt.Errorf("kube: adopt %s: %w", info.SandboxID, ErrNoPod)
	}
	if pod, err = b.stampFence(ctx, pod, token); err != nil {
		return info, err
	}
	info.Fence = fenceOf(pod)
	return info, nil
}

// ErrNoPod is returned (wrapped, matching fs.ErrNotExist) by Adopt when
// the sandbox's Pod is gone.
var ErrNoPod = fmt.Errorf("kube: no live pod: %w", fs.ErrNotExist)

var _ orchestrator.Adopter = (*Backend)(nil)

func (b *Backend) createService(ctx context.Context, req orchestrator.CreateRequest, pod *corev1.Pod) (*corev1.Service, error) {
	want := b.buildService(req, pod)
	svc, err := b.services().Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return svc, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kube: create service %s: %w", want.Name, err)
	}
	svc, err = b.services().Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: service %s exists but cannot be read: %w", want.Name, err)
	}
	if err := b.adoptable(&svc.ObjectMeta, req.SandboxID); err != nil {
		return nil, err
	}
	return svc, nil
}

// adoptable refuses objects of the same name that are not this sandbox's.
func (b *Backend) adoptable(m *metav1.ObjectMeta, sandboxID string) error {
	if m.Labels[labelManagedBy] != managedBy || m.Annotations[annotationSandboxID] != sandboxID {
		return fmt.Errorf("kube: %s/%s exists and is not sandbox %q's (labels %v): %w", m.Namespace, m.Name, sandboxID, m.Labels, fs.ErrExist)
	}
	if m.DeletionTimestamp != nil {
		return fmt.Errorf("kube: %s/%s is being deleted; retry: %w", m.Namespace, m.Name, fs.ErrExist)
	}
	return nil
}

// Destroy deletes the Pod and the Service; NotFound is fine. Under a
// thread lock (orchestrator.Fence) it reads the Pod first, refuses one
// that carries a newer fencing token, and deletes it with the
// resourceVersion it read as a precondition, so an adoption stamped in
// between makes the delete fail rather than remove the new holder's Pod.
func (b *Backend) Destroy(ctx context.Context, info orchestrator.SandboxInfo) error {
	if info.SandboxID == "" {
		return errors.New("kube: destroy: empty sandbox id")
	}
	name := b.podName(info)
	token, err := orchestrator.Fence(ctx)
	if err != nil {
		return fmt.Errorf("kube: delete %s: %w", name, err)
	}
	if token == 0 {
		return b.deleteObjects(ctx, name, nil)
	}
	pod, err := b.pods().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return b.deleteObjects(ctx, name, nil)
	}
	if err != nil {
		return fmt.Errorf("kube: get pod %s: %w", name, err)
	}
	if err := orchestrator.CheckFence(token, fenceOf(pod), "pod "+name); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	err = b.deleteObjects(ctx, name, &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("kube: delete %s: changed since it was read: %w", name, orchestrator.ErrStaleFence)
	}
	return err
}

// deleteObjects deletes the Pod (with pre, when set, as its precondition),
// then the Service. A failed precondition stops it before the Service.
func (b *Backend) deleteObjects(ctx context.Context, name string, pre *metav1.Preconditions) error {
	podOpts := metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}
	if err := b.pods().Delete(ctx, name, podOpts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete pod %s: %w", name, err)
	}
	err := b.services().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete service %s: %w", name, err)
	}
	b.o.Logger.Info("kube: deleted sandbox objects", "name", name)
	return nil
}

func (b *Backend) deleteQuietly(ctx context.Context, name string) {
	if err := b.deleteObjects(context.WithoutCancel(ctx), name, nil); err != nil {
		b.o.Logger.Error("kube: cleanup after a failed create", "name", name, "err", err)
	}
}

// IsAlive reports whether the sandbox's Pod exists and has not failed,
// finished or started deleting.
func (b *Backend) IsAlive(ctx context.Context, info orchestrator.SandboxInfo) (bool, error) {
	pod, err := b.findPod(ctx, info.SandboxID)
	return pod != nil, err
}

// Discover finds a live sandbox by label, with its URL, and records the
// call as activity.
func (b *Backend) Discover(ctx context.Context, sandboxID string) (orchestrator.SandboxInfo, bool, error) {
	pod, err := b.findPod(ctx, sandboxID)
	if err != nil || pod == nil {
		return orchestrator.SandboxInfo{}, false, err
	}
	svc, err := b.services().Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return orchestrator.SandboxInfo{}, false, nil // half made: the next Create completes it
	}
	if err != nil {
		return orchestrator.SandboxInfo{}, false, fmt.Errorf("kube: get service %s: %w", pod.Name, err)
	}
	info, err := b.info(pod, svc)
	if errors.Is(err, errNoPodIP) {
		return orchestrator.SandboxInfo{}, false, nil // not on the network yet: the next Create waits for it
	}
	if err != nil {
		return orchestrator.SandboxInfo{}, false, err
	}
	b.touch(ctx, pod)
	return info, true, nil
}

// findPod lists by the sandbox's labels and returns its live Pod, or nil.
func (b *Backend) findPod(ctx context.Context, sandboxID string) (*corev1.Pod, error) {
	list, err := b.pods().List(ctx, metav1.ListOptions{LabelSelector: sandboxSelector(sandboxID)})
	if err != nil {
		return nil, fmt.Errorf("kube: list pods of sandbox %q: %w", sandboxID, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Annotations[annotationSandboxID] == sandboxID && alive(p) {
			return p, nil
		}
	}
	return nil, nil
}

// ListRunning lists the live sandboxes that have a Service, except the
// warm pool's unclaimed Pods (ListPool).
func (b *Backend) ListRunning(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	return b.list(ctx, false)
}

// list lists live sandbox Pods that have a Service: the unclaimed pool's
// when pooled, the others otherwise.
func (b *Backend) list(ctx context.Context, pooled bool) ([]orchestrator.SandboxInfo, error) {
	pods, svcs, err := b.listSandboxObjects(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*corev1.Service, len(svcs.Items))
	for i := range svcs.Items {
		byName[svcs.Items[i].Name] = &svcs.Items[i]
	}
	var out []orchestrator.SandboxInfo
	for i := range pods.Items {
		p := &pods.Items[i]
		if svc := byName[p.Name]; svc != nil && alive(p) && unclaimedPod(p) == pooled {
			if info, err := b.info(p, svc); err == nil {
				out = append(out, info)
			}
		}
	}
	return out, nil
}

// ListStopped implements orchestrator.StoppedLister: the sandbox Pods
// that exist without serving, so that a sweep collects a dead owner's
// (a process killed with -9 between creating a Pod and its Service, or
// a Pod that ended: Failed or Succeeded). Pods being deleted are left
// out: they are going already.
func (b *Backend) ListStopped(ctx context.Context) ([]orchestrator.SandboxInfo, error) {
	pods, svcs, err := b.listSandboxObjects(ctx)
	if err != nil {
		return nil, err
	}
	served := make(map[string]bool, len(svcs.Items))
	for i := range svcs.Items {
		served[svcs.Items[i].Name] = true
	}
	var out []orchestrator.SandboxInfo
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || (served[p.Name] && alive(p)) {
			continue
		}
		out = append(out, orchestrator.SandboxInfo{SandboxID: p.Annotations[annotationSandboxID],
			ThreadID: p.Annotations[annotationThreadID], ContainerName: p.Name, ContainerID: string(p.UID),
			Owner: p.Annotations[annotationOwner], CreatedAt: p.CreationTimestamp.Time, Fence: fenceOf(p)})
	}
	return out, nil
}

// listSandboxObjects lists the namespace's sandbox Pods and Services.
func (b *Backend) listSandboxObjects(ctx context.Context) (*corev1.PodList, *corev1.ServiceList, error) {
	pods, err := b.pods().List(ctx, metav1.ListOptions{LabelSelector: selectorAll})
	if err != nil {
		return nil, nil, fmt.Errorf("kube: list pods: %w", err)
	}
	svcs, err := b.services().List(ctx, metav1.ListOptions{LabelSelector: selectorAll})
	if err != nil {
		return nil, nil, fmt.Errorf("kube: list services: %w", err)
	}
	return pods, svcs, nil
}

// Check implements provisioner.Checker: the API server answers a list of
// this namespace's sandbox pods.
func (b *Backend) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := b.pods().List(ctx, metav1.ListOptions{LabelSelector: selectorAll, Limit: 1}); err != nil {
		return fmt.Errorf("kube: list pods in %s: %w", b.o.Namespace, err)
	}
	return nil
}

func (b *Backend) info(pod *corev1.Pod, svc *corev1.Service) (orchestrator.SandboxInfo, error) {
	u, err := b.sandboxURL(pod, svc)
	if err != nil {
		return orchestrator.SandboxInfo{}, err
	}
	return orchestrator.SandboxInfo{SandboxID: pod.Annotations[annotationSandboxID], ThreadID: pod.Annotations[annotationThreadID],
		URL: u, ContainerName: pod.Name, ContainerID: string(pod.UID), Owner: pod.Annotations[annotationOwner],
		CreatedAt: pod.CreationTimestamp.Time, Fence: fenceOf(pod), PoolSlot: pod.Labels[labelPool]}, nil
}

// alive: not deleting, not failed or finished.
func alive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded
}

func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "being deleted"
	}
	return "in phase " + string(p.Status.Phase)
}

func ptrTo[T any](v T) *T { return &v }
