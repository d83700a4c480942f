package kube

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

const ns = "sage-test"

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestBackend(t *testing.T, mutate func(*Options)) (*Backend, *fake.Clientset, *fakeClock) {
	t.Helper()
	cs := fake.NewClientset()
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o := Options{Client: cs, Namespace: ns, Now: clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mutate != nil {
		mutate(&o)
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b, cs, clock
}

func req(id, thread string) orchestrator.CreateRequest {
	return orchestrator.CreateRequest{SandboxID: id, ThreadID: thread, Owner: "proc-1", Image: "sage-sandbox:test", Port: 8080,
		Mounts: []sandbox.VolumeMount{{HostPath: "/srv/sage/threads/t/user-data", SandboxPath: "/mnt/user-data"},
			{HostPath: "/srv/sage/skills", SandboxPath: "/mnt/skills", ReadOnly: true}},
		Env: map[string]string{"B": "2", "A": "1"}, MemoryMB: 512, CPUs: 0.5, Token: "tok"}
}

func getPod(t *testing.T, cs *fake.Clientset, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCreatePodSpec(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	info, err := b.Create(context.Background(), req("0123456789abcdef", "thread-1"))
	if err != nil {
		t.Fatal(err)
	}
	name := "sage-sandbox-0123456789abcdef"
	if info.URL != "http://"+name+"."+ns+".svc.cluster.local:8080" || info.ContainerName != name || info.ThreadID != "thread-1" || info.Owner != "proc-1" {
		t.Fatalf("info %+v", info)
	}
	p := getPod(t, cs, name)
	wantLabels := map[string]string{labelManagedBy: managedBy, labelName: appName, labelSandbox: "0123456789abcdef", labelThread: "thread-1"}
	for k, v := range wantLabels {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.Labels[k], v)
		}
	}
	if p.Annotations[annotationSandboxID] != "0123456789abcdef" || p.Annotations[annotationThreadID] != "thread-1" || p.Annotations[annotationActivity] == "" {
		t.Errorf("annotations %v", p.Annotations)
	}
	checkSpec(t, p)
}

func checkSpec(t *testing.T, p *corev1.Pod) {
	t.Helper()
	s := p.Spec
	if len(s.Containers) != 1 || *s.AutomountServiceAccountToken || *s.EnableServiceLinks || s.HostNetwork || s.HostPID || s.HostIPC {
		t.Fatalf("pod spec %+v", s)
	}
	c := s.Containers[0]
	if c.Image != "sage-sandbox:test" || c.Ports[0].ContainerPort != 8080 || c.Ports[0].Name != portName {
		t.Errorf("container %+v", c)
	}
	for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/v1/sandbox" || pr.HTTPGet.Port.StrVal != portName ||
			len(pr.HTTPGet.HTTPHeaders) != 1 || pr.HTTPGet.HTTPHeaders[0].Value != "Bearer tok" {
			t.Errorf("probe %+v", pr)
		}
	}
	sc := c.SecurityContext
	if *sc.Privileged || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security %+v", sc)
	}
	psc := s.SecurityContext
	if !*psc.RunAsNonRoot || *psc.RunAsUser != 1000 || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security %+v", psc)
	}
	r := c.Resources
	if r.Limits.Memory().String() != "512Mi" || r.Limits.Cpu().String() != "500m" || r.Requests.Cpu().String() != "100m" ||
		r.Requests.Memory().String() != "256Mi" || r.Limits.StorageEphemeral().String() != "1Gi" {
		t.Errorf("resources %+v", r)
	}
	if len(c.Env) != 3 || c.Env[0].Name != "A" || c.Env[1].Name != "B" || c.Env[2].Name != "SAGE_SANDBOXD_ALLOWED_HOSTS" ||
		!strings.Contains(c.Env[2].Value, ".svc.cluster.local") {
		t.Errorf("env %+v (the Service's names are sandboxd's allowed hosts)", c.Env)
	}
	if len(s.Volumes) != 2 || s.Volumes[0].HostPath.Path != "/srv/sage/threads/t/user-data" || !c.VolumeMounts[1].ReadOnly || c.VolumeMounts[1].MountPath != "/mnt/skills" {
		t.Errorf("volumes %+v mounts %+v", s.Volumes, c.VolumeMounts)
	}
}

func TestCreateServiceClusterIP(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	if _, err := b.Create(context.Background(), req("abc", "")); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "sage-sandbox-abc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector[labelSandbox] != "abc" || svc.Spec.Ports[0].Port != 8080 ||
		svc.Spec.Ports[0].TargetPort.StrVal != portName || svc.Labels[labelManagedBy] != managedBy {
		t.Fatalf("service %+v", svc)
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].Kind != "Pod" || svc.OwnerReferences[0].Name != "sage-sandbox-abc" {
		t.Fatalf("owner refs %+v", svc.OwnerReferences)
	}
	if _, ok := svc.Labels[labelThread]; ok {
		t.Fatal("anonymous sandbox has a thread label")
	}
}

func TestCreateNodePort(t *testing.T) {
	b, cs, _ := newTestBackend(t, func(o *Options) { o.ServiceType = corev1.ServiceTypeNodePort; o.NodeHost = "10.0.0.7" })
	// The fake clientset does not allocate node ports; the API server does.
	cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
		svc.Spec.Ports[0].NodePort = 31234
		return false, nil, nil
	})
	info, err := b.Create(context.Background(), req("abc", "t"))
	if err != nil {
		t.Fatal(err)
	}
	if info.URL != "http://10.0.0.7:31234" {
		t.Fatalf("url %q", info.URL)
	}
	if _, err := New(Options{Client: cs, Namespace: ns, ServiceType: corev1.ServiceTypeNodePort}); err == nil {
		t.Fatal("NodePort without NodeHost accepted")
	}
}

func TestNamesAndLabelsForAwkwardIDs(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	id, thread := "_Upper_Case_"+strings.Repeat("x", 50), "-t"
	info, err := b.Create(context.Background(), req(id, thread))
	if err != nil {
		t.Fatal(err)
	}
	if !dnsLabel.MatchString(info.ContainerName) || len(info.ContainerName) > 63 {
		t.Fatalf("name %q", info.ContainerName)
	}
	p := getPod(t, cs, info.ContainerName)
	for _, v := range []string{p.Labels[labelSandbox], p.Labels[labelThread]} {
		if !labelValue.MatchString(v) || len(v) > 63 {
			t.Fatalf("label value %q", v)
		}
	}
	got, ok, err := b.Discover(context.Background(), id)
	if err != nil || !ok || got.SandboxID != id || got.ThreadID != thread {
		t.Fatalf("discover %+v %v %v", got, ok, err)
	}
}

func TestAlreadyExistsAdopts(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	first, err := b.Create(context.Background(), req("abc", "t"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Create(context.Background(), req("abc", "t"))
	if err != nil {
		t.Fatal(err)
	}
	if first.URL != second.URL || first.ContainerName != second.ContainerName {
		t.Fatalf("%+v vs %+v", first, second)
	}
	pods, _ := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 1 {
		t.Fatalf("%d pods", len(pods.Items))
	}
}

func TestAlreadyExistsForeignRefused(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sage-sandbox-abc", Namespace: ns, Labels: map[string]string{"app": "other"}}}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Create(context.Background(), req("abc", "t"))
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "not sandbox") {
		t.Fatalf("err %v", err)
	}
	if p := getPod(t, cs, "sage-sandbox-abc"); p.Labels["app"] != "other" {
		t.Fatal("foreign pod touched")
	}
}

func TestServiceFailureRemovesPod(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	cs.PrependReactor("create", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("services"), "x", errors.New("rbac says no"))
	})
	if _, err := b.Create(context.Background(), req("abc", "t")); err == nil || !strings.Contains(err.Error(), "rbac says no") {
		t.Fatalf("err %v", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(context.Background(), "sage-sandbox-abc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod left behind: %v", err)
	}
}

func TestDestroy(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	info, err := b.Create(context.Background(), req("abc", "t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(context.Background(), info); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, info.ContainerName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod: %v", err)
	}
	if _, err := cs.CoreV1().Services(ns).Get(ctx, info.ContainerName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("service: %v", err)
	}
	if err := b.Destroy(ctx, info); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	if ok, err := b.IsAlive(ctx, info); ok || err != nil {
		t.Fatalf("alive after destroy: %v %v", ok, err)
	}
}

func TestDiscoverListAndLiveness(t *testing.T) {
	b, cs, _ := newTestBackend(t, nil)
	ctx := context.Background()
	for _, id := range []string{"aaa", "bbb", "ccc"} {
		if _, err := b.Create(ctx, req(id, "t-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	// An unrelated pod in the namespace is ignored.
	_, _ = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}, metav1.CreateOptions{})
	setPhase(t, cs, "sage-sandbox-bbb", corev1.PodFailed)
	if err := cs.CoreV1().Services(ns).Delete(ctx, "sage-sandbox-ccc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := b.ListRunning(ctx)
	if err != nil || len(list) != 1 || list[0].SandboxID != "aaa" || list[0].ThreadID != "t-aaa" {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, ok, _ := b.Discover(ctx, "bbb"); ok {
		t.Fatal("failed pod discovered")
	}
	if _, ok, _ := b.Discover(ctx, "ccc"); ok {
		t.Fatal("pod without service discovered")
	}
	if _, ok, _ := b.Discover(ctx, "zzz"); ok {
		t.Fatal("unknown discovered")
	}
	if ok, _ := b.IsAlive(ctx, orchestrator.SandboxInfo{SandboxID: "bbb"}); ok {
		t.Fatal("failed pod alive")
	}
	// Create completes a half-made sandbox.
	if _, err := b.Create(ctx, req("ccc", "t-ccc")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.Discover(ctx, "ccc"); !ok {
		t.Fatal("ccc not completed")
	}
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

func setPhase(t *testing.T, cs *fake.Clientset, name string, phase corev1.PodPhase) {
	t.Helper()
	p := getPod(t, cs, name)
	p.Status.Phase = phase
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsChecked(t *testing.T) {
	cs := fake.NewClientset()
	for _, o := range []Options{
		{Namespace: ns},
		{Client: cs},
		{Client: cs, Namespace: "Bad_NS"},
		{Client: cs, Namespace: ns, ServiceType: "LoadBalancer"},
		{Client: cs, Namespace: ns, NamePrefix: "Bad"},
		{Client: cs, Namespace: ns, CPULimit: "lots"},
		{Client: cs, Namespace: ns, Port: 70000},
		{Client: cs, Namespace: ns, PodAddress: true, ServiceType: corev1.ServiceTypeNodePort, NodeHost: "h"},
		{Client: cs, Namespace: ns, RuntimeClass: "gVisor!"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}

func TestAllowRoot(t *testing.T) {
	b, cs, _ := newTestBackend(t, func(o *Options) { o.AllowRoot = true })
	if _, err := b.Create(context.Background(), req("abc", "t")); err != nil {
		t.Fatal(err)
	}
	p := getPod(t, cs, "sage-sandbox-abc")
	if p.Spec.SecurityContext.RunAsNonRoot != nil || p.Spec.SecurityContext.RunAsUser != nil ||
		*p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation {
		t.Fatalf("%+v", p.Spec.SecurityContext)
	}
}
