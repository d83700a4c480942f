//go:build linux

package kube

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// realEnv is one control plane with the manifests applied, an admin
// client (for what the test plays: the kubelet's status, a foreign
// object) and the provisioner's own client (its ServiceAccount token).
type realEnv struct {
	cp    *controlPlane
	admin kubernetes.Interface
	prov  kubernetes.Interface
	clock *fakeClock
}

func (e *realEnv) backend(t *testing.T, mutate func(*Options)) *Backend {
	t.Helper()
	o := Options{Client: e.prov, Namespace: manifestNamespace, Now: e.clock.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mutate != nil {
		mutate(&o)
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *realEnv) pod(t *testing.T, name string) (*corev1.Pod, error) {
	t.Helper()
	return e.admin.CoreV1().Pods(manifestNamespace).Get(context.Background(), name, metav1.GetOptions{})
}

func (e *realEnv) service(t *testing.T, name string) (*corev1.Service, error) {
	t.Helper()
	return e.admin.CoreV1().Services(manifestNamespace).Get(context.Background(), name, metav1.GetOptions{})
}

// gone fails t unless neither a Pod nor a Service named name exists.
func (e *realEnv) gone(t *testing.T, name string) {
	t.Helper()
	if _, err := e.pod(t, name); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s: %v, want NotFound", name, err)
	}
	if _, err := e.service(t, name); !apierrors.IsNotFound(err) {
		t.Errorf("service %s: %v, want NotFound", name, err)
	}
}

// setStatus plays the kubelet: it writes the Pod's status subresource.
func (e *realEnv) setStatus(t *testing.T, name string, phase corev1.PodPhase, ready bool) {
	t.Helper()
	p, err := e.pod(t, name)
	if err != nil {
		t.Fatal(err)
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Phase = phase
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: metav1.Now()}}
	if _, err := e.admin.CoreV1().Pods(manifestNamespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status of %s: %v", name, err)
	}
}

// TestRealAPIServer runs the backend against a real kube-apiserver (and
// etcd): the deploy/kubernetes manifests, the provisioner's RBAC and
// token, Pod Security Admission "restricted", adoption, readiness, the
// reaper and deletes.
func TestRealAPIServer(t *testing.T) {
	cp := startControlPlane(t)
	e := &realEnv{cp: cp, admin: cp.clientset(t, cp.token), clock: &fakeClock{t: time.Now().UTC()}}
	t.Run("ManifestsApplyStrictly", func(t *testing.T) {
		applied := applyManifests(t, cp)
		for _, want := range []string{"Namespace/sage", "ServiceAccount/sage-provisioner", "Role/sage-provisioner",
			"RoleBinding/sage-provisioner", "Deployment/sage-provisioner", "Service/sage-provisioner", "RuntimeClass/gvisor"} {
			if !slices.Contains(applied, want) {
				t.Errorf("applied %v, missing %s", applied, want)
			}
		}
		testApplyRefusesUnknownFields(t, cp)
	})
	if t.Failed() {
		t.FailNow()
	}
	e.prov = cp.clientset(t, provisionerToken(t, e.admin))
	t.Run("ProvisionerIdentityAndRBAC", func(t *testing.T) { testRBAC(t, e) })
	t.Run("SecurityContext", func(t *testing.T) { testSecurityContext(t, e) })
	t.Run("Adopt", func(t *testing.T) { testAdopt(t, e) })
	t.Run("Readiness", func(t *testing.T) { testReadiness(t, e) })
	t.Run("Reaper", func(t *testing.T) { testReaper(t, e) })
	t.Run("DestroyDeletesBoth", func(t *testing.T) { testDestroy(t, e) })
	t.Run("Fence", func(t *testing.T) { testFence(t, e) })
	t.Run("SweepDeadOwner", func(t *testing.T) { testSweepDeadOwner(t, e) })
	t.Run("PoolClaimRace", func(t *testing.T) { testPoolClaimRace(t, e) })
}

func testRBAC(t *testing.T, e *realEnv) {
	ctx := context.Background()
	r, err := e.prov.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Status.UserInfo.Username; u != "system:serviceaccount:sage:sage-provisioner" {
		t.Fatalf("provisioner authenticates as %q", u)
	}
	if _, err := e.prov.CoreV1().Pods(manifestNamespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list pods in its namespace: %v", err)
	}
	forbidden := map[string]error{}
	_, forbidden["list secrets in its namespace"] = e.prov.CoreV1().Secrets(manifestNamespace).List(ctx, metav1.ListOptions{})
	_, forbidden["list pods in default"] = e.prov.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	_, forbidden["list pods cluster-wide"] = e.prov.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	_, forbidden["list roles"] = e.prov.RbacV1().Roles(manifestNamespace).List(ctx, metav1.ListOptions{})
	_, forbidden["list deployments"] = e.prov.AppsV1().Deployments(manifestNamespace).List(ctx, metav1.ListOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
}

func testSecurityContext(t *testing.T, e *realEnv) {
	ctx := context.Background()
	b := e.backend(t, nil)
	info, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: "sec1", ThreadID: "thread/1", Owner: "proc-1", Token: "tok"})
	if err != nil {
		t.Fatalf("create (admitted by Pod Security %q): %v", "restricted", err)
	}
	p, err := e.pod(t, info.ContainerName)
	if err != nil {
		t.Fatal(err)
	}
	ps, c := p.Spec.SecurityContext, p.Spec.Containers[0]
	cs := c.SecurityContext
	switch {
	case ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 1000:
		t.Errorf("pod security context %+v", ps)
	case ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp %+v", ps.SeccompProfile)
	case cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.Capabilities == nil ||
		!slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Errorf("container security context %+v", cs)
	case p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken || slices.ContainsFunc(p.Spec.Volumes,
		func(v corev1.Volume) bool { return v.EmptyDir == nil }):
		t.Errorf("service-account token mounted or volumes other than the thread directories' emptyDirs: %v", p.Spec.Volumes)
	case p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "":
		t.Errorf("phase %s node %q: nothing schedules here", p.Status.Phase, p.Spec.NodeName)
	}
	svc, err := e.service(t, info.ContainerName)
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != p.UID || svc.OwnerReferences[0].Kind != "Pod" {
		t.Errorf("service owner references %+v, want the Pod %s", svc.OwnerReferences, p.UID)
	}
	_, cidr, _ := net.ParseCIDR("10.96.0.0/24")
	if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil || !cidr.Contains(ip) {
		t.Errorf("cluster IP %q not allocated from the service range", svc.Spec.ClusterIP)
	}
	if info.URL != "http://sage-sandbox-sec1.sage.svc.cluster.local:8080" || info.ContainerID != string(p.UID) {
		t.Errorf("info %+v", info)
	}

	// Control: Pod Security "restricted" is really enforced. A root
	// sandbox and one with a hostPath mount are refused, and nothing is
	// left behind.
	root := e.backend(t, func(o *Options) { o.AllowRoot = true })
	_, err = root.Create(ctx, orchestrator.CreateRequest{SandboxID: "root1"})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "runAsNonRoot") {
		t.Errorf("root sandbox in a restricted namespace: %v, want Forbidden naming runAsNonRoot", err)
	}
	e.gone(t, "sage-sandbox-root1")
	_, err = b.Create(ctx, orchestrator.CreateRequest{SandboxID: "mount1",
		Mounts: []sandbox.VolumeMount{{HostPath: "/srv/sage/x", SandboxPath: "/mnt/x"}}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "hostPath") {
		t.Errorf("hostPath sandbox in a restricted namespace: %v, want Forbidden naming hostPath", err)
	}
	e.gone(t, "sage-sandbox-mount1")
}

func testAdopt(t *testing.T, e *realEnv) {
	ctx := context.Background()
	// Two provisioner replicas create the same sandbox at once: one
	// creates, the other adopts; both answer with the same Pod.
	b1, b2 := e.backend(t, nil), e.backend(t, nil)
	var wg sync.WaitGroup
	infos, errs := make([]orchestrator.SandboxInfo, 2), make([]error, 2)
	for i, b := range []*Backend{b1, b2} {
		wg.Go(func() {
			infos[i], errs[i] = b.Create(ctx, orchestrator.CreateRequest{SandboxID: "race1", ThreadID: "t-race"})
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent creates: %v, %v", errs[0], errs[1])
	}
	if infos[0].ContainerID == "" || infos[0].ContainerID != infos[1].ContainerID {
		t.Fatalf("concurrent creates answered different pods: %q and %q", infos[0].ContainerID, infos[1].ContainerID)
	}
	list, err := e.admin.CoreV1().Pods(manifestNamespace).List(ctx, metav1.ListOptions{LabelSelector: sandboxSelector("race1")})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("pods of race1: %d, %v", len(list.Items), err)
	}

	// A Pod of the same name that is not ours is refused, and left alone.
	foreign := b1.buildPod(orchestrator.CreateRequest{SandboxID: "foreign", Image: "other:1", Port: 8080})
	foreign.Labels, foreign.Annotations = map[string]string{"app": "someone-else"}, nil
	made, err := e.admin.CoreV1().Pods(manifestNamespace).Create(ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b1.Create(ctx, orchestrator.CreateRequest{SandboxID: "foreign"})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over a foreign pod: %v, want fs.ErrExist", err)
	}
	after, err := e.pod(t, made.Name)
	if err != nil || after.ResourceVersion != made.ResourceVersion {
		t.Fatalf("foreign pod changed: %v (rv %s -> %s)", err, made.ResourceVersion, after.ResourceVersion)
	}
	if _, err := e.service(t, made.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("service made beside a foreign pod: %v", err)
	}
}

func testReadiness(t *testing.T, e *realEnv) {
	ctx := context.Background()
	b := e.backend(t, nil)
	info, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: "ready1"})
	if err != nil {
		t.Fatal(err)
	}
	name := info.ContainerName
	alive := func(want bool) {
		t.Helper()
		if ok, err := b.IsAlive(ctx, info); err != nil || ok != want {
			t.Fatalf("IsAlive %v, %v; want %v", ok, err, want)
		}
		if _, ok, err := b.Discover(ctx, "ready1"); err != nil || ok != want {
			t.Fatalf("Discover found %v, %v; want %v", ok, err, want)
		}
	}
	alive(true) // Pending: starting
	// The provisioner may not write status: only the kubelet (the test) does.
	p, _ := e.pod(t, name)
	p.Status.Phase = corev1.PodFailed
	if _, err := e.prov.CoreV1().Pods(manifestNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("provisioner wrote pod status: %v, want Forbidden", err)
	}
	e.setStatus(t, name, corev1.PodRunning, true)
	alive(true)
	running, err := b.ListRunning(ctx)
	if err != nil || !slices.ContainsFunc(running, func(i orchestrator.SandboxInfo) bool { return i.SandboxID == "ready1" }) {
		t.Fatalf("ListRunning %v, %v: want ready1", running, err)
	}
	e.setStatus(t, name, corev1.PodFailed, false)
	alive(false)
	if _, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: "ready1"}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over a failed pod: %v, want fs.ErrExist", err)
	}
	reaped, err := b.Reap(ctx, ReapOptions{})
	if err != nil || !slices.Contains(reaped, name) {
		t.Fatalf("Reap %v, %v: want %s (failed)", reaped, err, name)
	}
	e.gone(t, name)
	if _, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: "ready1"}); err != nil {
		t.Fatalf("create after the reaper removed the failed pod: %v", err)
	}
}

func testReaper(t *testing.T, e *realEnv) {
	ctx := context.Background()
	b := e.backend(t, nil)
	for _, id := range []string{"idle1", "busy1"} {
		if _, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: id}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Add(2 * time.Hour)
	if _, ok, err := b.Discover(ctx, "busy1"); !ok || err != nil {
		t.Fatalf("discover busy1: %v %v", ok, err)
	}
	reaped, err := b.Reap(ctx, ReapOptions{TTL: time.Hour})
	if err != nil || !slices.Contains(reaped, "sage-sandbox-idle1") || slices.Contains(reaped, "sage-sandbox-busy1") {
		t.Fatalf("Reap %v, %v: want idle1 and not busy1", reaped, err)
	}
	e.gone(t, "sage-sandbox-idle1")

	// A touch between the reaper's scan and its delete saves the sandbox:
	// the API server checks the delete's resourceVersion precondition.
	stale, err := e.pod(t, "sage-sandbox-busy1")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Minute)
	if _, ok, err := b.Discover(ctx, "busy1"); !ok || err != nil {
		t.Fatalf("discover busy1: %v %v", ok, err)
	}
	err = b.deleteObjects(ctx, stale.Name, &metav1.Preconditions{UID: &stale.UID, ResourceVersion: &stale.ResourceVersion})
	if !apierrors.IsConflict(err) {
		t.Fatalf("delete with a stale resourceVersion: %v, want Conflict", err)
	}
	for _, get := range []func(*testing.T, string) error{
		func(t *testing.T, n string) error { _, err := e.pod(t, n); return err },
		func(t *testing.T, n string) error { _, err := e.service(t, n); return err }} {
		if err := get(t, stale.Name); err != nil {
			t.Fatalf("touched sandbox lost an object: %v", err)
		}
	}
}

// testDestroy: Destroy deletes the Pod and the Service itself (no garbage
// collector runs here, so the Service's ownerReference cannot be what
// removes it).
func testDestroy(t *testing.T, e *realEnv) {
	ctx := context.Background()
	b := e.backend(t, nil)
	info, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: "gone1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(ctx, info); err != nil {
		t.Fatal(err)
	}
	e.gone(t, info.ContainerName)
	if err := b.Destroy(ctx, info); err != nil {
		t.Fatalf("second destroy: %v, want nil (NotFound is fine)", err)
	}
}
