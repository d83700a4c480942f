//go:build linux

package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner"
)

// nodeEnv is TestRealNode's world: the node, the provisioner API served
// in process over the kube backend (with the provisioner's own token),
// and a state directory the aio providers share.
type nodeEnv struct {
	t       testing.TB // the whole test
	n       *realNode
	prov    kubernetes.Interface
	backend *Backend
	url     string // the provisioner API
	home    string
	// provToken is the provisioner's ServiceAccount token.
	provToken string
}

// nodeFile is written in the sandbox's workspace (an emptyDir of the Pod).
const nodeFile = orchestrator.UserDataPath + "/workspace/sage-node.txt"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// provider is an aio provider in remote mode on the provisioner, as a
// user configures it (provisioner_url); every cache hit asks the backend
// whether the sandbox still runs. The whole test's cleanup shuts it down
// (a step's would release its sandboxes before the next step).
func (e *nodeEnv) provider(t testing.TB) *orchestrator.Provider {
	t.Helper()
	whole := e.t
	p, err := orchestrator.ProviderFromConfig(sandbox.RemoteConfig{Provider: "aio", ProviderConfig: map[string]any{
		orchestrator.KeyProvisionerURL: e.url, orchestrator.KeyHome: e.home, orchestrator.KeyReadyTimeout: "3m"}},
		orchestrator.ProviderOptions{LivenessInterval: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	whole.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			whole.Errorf("provider shutdown: %v", err)
		}
	})
	return p
}

// threadPods lists the sandbox Pods of a thread.
func (e *nodeEnv) threadPods(t testing.TB, thread string) []corev1.Pod {
	t.Helper()
	l, err := e.n.admin.CoreV1().Pods(manifestNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: selectorAll + "," + labelThread + "=" + labelFor(thread)})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// onePod is the thread's only Pod, or fails t.
func (e *nodeEnv) onePod(t testing.TB, thread string) corev1.Pod {
	t.Helper()
	ps := e.threadPods(t, thread)
	if len(ps) != 1 {
		t.Fatalf("thread %s has %d pods, want 1: %v", thread, len(ps), podNames(ps))
	}
	return ps[0]
}

func podNames(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name+"("+string(p.UID)+")")
	}
	return out
}

// waitFor polls cond (bounded by d), failing t with what it last said.
func waitFor(t testing.TB, what string, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
	}
	t.Fatalf("%s: not after %s (last: %s)", what, d, last)
}

// podReady is the Pod's Ready condition, as the kubelet wrote it.
func podReady(p *corev1.Pod) (bool, string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, fmt.Sprintf("phase %s, Ready=%s %s", p.Status.Phase, c.Status, c.Message)
		}
	}
	return false, "phase " + string(p.Status.Phase) + ", no Ready condition"
}

// TestRealNode runs the kube backend on a real single-node cluster
// (startNode): sandbox Pods scheduled, started from the imported image
// and Ready by their own readiness probe; the aio provider in remote mode
// (provisioner_url) running commands and file operations in them over the
// pod network; one thread, one Pod across two providers; release and the
// idle reaper deleting them and the garbage collector removing what a Pod
// owned; a Pod deleted behind the provisioner's back made again on the
// next acquire; the kubelet killed while a sandbox runs (which goes on
// answering) and started again (which adopts it: same Pod, no restart).
func TestRealNode(t *testing.T) {
	start := time.Now()
	n := startNode(t)
	for _, k := range slices.Sorted(maps.Keys(n.started)) {
		t.Logf("start: %s took %s", k, n.started[k].Round(time.Millisecond))
	}
	applyManifests(t, n.cp)
	// The manifests' provisioner Deployment would run the image of `make
	// provisioner-image`, which is not on this node: the test serves the
	// provisioner API itself, over the same backend and token.
	if _, err := n.admin.AppsV1().Deployments(manifestNamespace).Patch(context.Background(), "sage-provisioner",
		types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	tok := provisionerToken(t, n.admin)
	e := &nodeEnv{t: t, n: n, prov: n.cp.clientset(t, tok), provToken: tok, home: t.TempDir()}
	b, err := New(Options{Client: e.prov, Namespace: manifestNamespace, Image: nodeImage, PullPolicy: corev1.PullNever,
		PodAddress: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.backend = b
	srv, err := provisioner.NewServer(provisioner.Options{Backend: b, BackendName: "kubernetes", Logger: quiet,
		Mounts:   provisioner.MountPolicy{DropUnlisted: true}, // hostPath is refused by Pod Security "restricted"
		Defaults: provisioner.Defaults{Image: nodeImage}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	e.url = ts.URL

	steps := []struct {
		name string
		f    func(*testing.T, *nodeEnv, *stepState)
	}{
		{"SandboxPodRunsCommandsAndFiles", testNodeSandbox},
		{"OneThreadOnePodAcrossProviders", testNodeOneThread},
		{"PodDeletedBehindTheBackIsMadeAgain", testNodeRecreate},
		{"KubeletKilledAndRestarted", testNodeKubeletRestart},
		{"ReleaseAndIdleReaperDelete", testNodeRelease},
		{"WarmPool", testNodeWarmPool},
		{"PoolEightProcessesAndKill9", testNodePoolProcesses},
		{"ContainerKilledFromContainerd", testNodeContainerKilled},
		{"CLIThroughSageProvisioner", testNodeCLI},
		{"GvisorRuntimeClass", testNodeGvisor},
	}
	st := &stepState{}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.f(t, e, st) }) {
			t.Fatalf("step %s failed; the later steps depend on it", s.name)
		}
	}
	t.Logf("TestRealNode until teardown: %s", time.Since(start).Round(time.Millisecond))
}

// stepState carries what one step made to the next.
type stepState struct {
	pA      *orchestrator.Provider
	sidA    string
	podA    corev1.Pod
	marker  string
	threadB string
}

func testNodeSandbox(t *testing.T, e *nodeEnv, st *stepState) {
	ctx := context.Background()
	st.pA = e.provider(t)
	t0 := time.Now()
	sid, err := st.pA.Acquire(ctx, "thread-a")
	if err != nil {
		t.Fatalf("acquire thread-a through the provisioner: %v\n%s", err, e.n.logTails())
	}
	t.Logf("cold acquire (Pod and Service created, scheduled, started, Ready, API answering): %s", time.Since(t0).Round(time.Millisecond))
	st.sidA = sid
	pod := e.onePod(t, "thread-a")
	st.podA = pod
	c := pod.Spec.Containers[0]
	switch {
	case pod.Spec.NodeName != e.n.name:
		t.Fatalf("pod %s is on node %q, want %s (the scheduler's binding)", pod.Name, pod.Spec.NodeName, e.n.name)
	case c.Image != nodeImage || c.ImagePullPolicy != corev1.PullNever:
		t.Fatalf("container image %s pull %s, want %s Never", c.Image, c.ImagePullPolicy, nodeImage)
	case c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil:
		t.Fatalf("no readiness probe: %+v", c.ReadinessProbe)
	}
	// Ready by the kubelet's readiness probe (nothing here writes status);
	// it may lag the provider's own wait for the API by a probe period.
	waitFor(t, "pod "+pod.Name+" Ready by its readiness probe", 2*time.Minute, func() (bool, string) {
		p, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = *p
		return podReady(p)
	})
	st.podA = pod
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			t.Logf("pod created to Ready (the API's timestamps, 1 s resolution; the probe's initial delay is 1 s): %s",
				c.LastTransitionTime.Sub(pod.CreationTimestamp.Time))
		}
	}
	// Ready by the kubelet's probe: the container ran and passed it.
	if len(pod.Status.ContainerStatuses) != 1 || !pod.Status.ContainerStatuses[0].Ready || pod.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("container statuses %+v", pod.Status.ContainerStatuses)
	}
	info, ok := st.pA.Info(sid)
	if !ok {
		t.Fatalf("provider has no info for %s", sid)
	}
	u, err := url.Parse(info.URL)
	if err != nil || !e.n.subnet.Contains(net.ParseIP(u.Hostname())) || u.Hostname() != pod.Status.PodIP {
		t.Fatalf("sandbox URL %q: want the pod IP %s on the node's pod network %s", info.URL, pod.Status.PodIP, e.n.subnet)
	}
	svc, err := e.n.admin.CoreV1().Services(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != pod.UID {
		t.Fatalf("service %s: %v, owners %+v; want it owned by pod %s", pod.Name, err, svc.OwnerReferences, pod.UID)
	}
	// The controller manager's endpoint slice controller found the Pod
	// behind its Service (it lists only Ready Pods).
	waitFor(t, "an EndpointSlice of service "+pod.Name+" with the pod's IP", 2*time.Minute, func() (bool, string) {
		l, err := e.n.admin.DiscoveryV1().EndpointSlices(manifestNamespace).List(ctx,
			metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + pod.Name})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range l.Items {
			for _, ep := range s.Endpoints {
				if slices.Contains(ep.Addresses, pod.Status.PodIP) && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d slices", len(l.Items))
	})

	sb, ok := st.pA.Get(sid)
	if !ok {
		t.Fatalf("provider has no handle for %s", sid)
	}
	res, err := sb.ExecuteCommand(ctx, "id -u; hostname; echo $((6*7)); uname -r", sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("command in the pod: %+v, %v", res, err)
	}
	// runc: the host's kernel.
	if got := strings.Fields(res.Stdout); !slices.Equal(got, []string{"1000", pod.Name, "42", hostKernel(t)}) {
		t.Fatalf("command output %q: want uid 1000, the pod's hostname %s, 42, the host's kernel %s", res.Stdout, pod.Name, hostKernel(t))
	}
	st.marker = "written through the provisioner at " + time.Now().Format(time.RFC3339Nano)
	if err := sb.WriteFile(ctx, nodeFile, []byte(st.marker), sandbox.WriteOptions{}); err != nil {
		t.Fatalf("write a file in the pod: %v", err)
	}
	data, err := sb.ReadFile(ctx, nodeFile)
	if err != nil || string(data) != st.marker {
		t.Fatalf("read back %q, %v; want %q", data, err, st.marker)
	}
	res, err = sb.ExecuteCommand(ctx, "cat "+nodeFile, sandbox.ExecOptions{})
	if err != nil || res.Stdout != st.marker {
		t.Fatalf("the file seen by a command: %q, %v", res.Stdout, err)
	}
}

func testNodeOneThread(t *testing.T, e *nodeEnv, st *stepState) {
	ctx := context.Background()
	pB := e.provider(t)
	sid, err := pB.Acquire(ctx, "thread-a")
	if err != nil {
		t.Fatalf("second provider's acquire of thread-a: %v", err)
	}
	if sid != st.sidA {
		t.Fatalf("second provider got sandbox %s, want the first's %s", sid, st.sidA)
	}
	if pod := e.onePod(t, "thread-a"); pod.UID != st.podA.UID {
		t.Fatalf("thread-a's pod is %s now, was %s", pod.UID, st.podA.UID)
	}
	sb, ok := pB.Get(sid)
	if !ok {
		t.Fatalf("second provider has no handle for %s", sid)
	}
	data, err := sb.ReadFile(ctx, nodeFile)
	if err != nil || string(data) != st.marker {
		t.Fatalf("second provider reads %q, %v; want the first's file %q (the same pod)", data, err, st.marker)
	}
}

func testNodeRecreate(t *testing.T, e *nodeEnv, st *stepState) {
	ctx := context.Background()
	st.threadB = "thread-b"
	sid, err := st.pA.Acquire(ctx, st.threadB)
	if err != nil {
		t.Fatalf("acquire %s: %v", st.threadB, err)
	}
	old := e.onePod(t, st.threadB)
	// Behind the provisioner's back: the Pod alone is deleted; the garbage
	// collector removes the Service it owned.
	if err := e.n.admin.CoreV1().Pods(manifestNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the garbage collector removing service "+old.Name+" with its owner pod", 2*time.Minute, func() (bool, string) {
		_, err := e.n.admin.CoreV1().Services(manifestNamespace).Get(ctx, old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("service still there (%v)", err)
	})
	waitFor(t, "pod "+old.Name+" gone", 2*time.Minute, func() (bool, string) {
		for _, p := range e.threadPods(t, st.threadB) {
			if p.UID == old.UID {
				return false, "deletion " + podState(&p)
			}
		}
		return true, ""
	})
	sid2, err := st.pA.Acquire(ctx, st.threadB)
	if err != nil {
		t.Fatalf("acquire %s after its pod was deleted: %v", st.threadB, err)
	}
	if sid2 != sid {
		t.Fatalf("thread %s moved from sandbox %s to %s", st.threadB, sid, sid2)
	}
	pod := e.onePod(t, st.threadB)
	if pod.UID == old.UID {
		t.Fatalf("pod %s was not made again", pod.Name)
	}
	sb, ok := st.pA.Get(sid2)
	if !ok {
		t.Fatalf("no handle for %s", sid2)
	}
	if res, err := sb.ExecuteCommand(ctx, "hostname", sandbox.ExecOptions{}); err != nil || strings.TrimSpace(res.Stdout) != pod.Name {
		t.Fatalf("command in the new pod: %+v, %v", res, err)
	}
	if _, err := e.n.admin.CoreV1().Services(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the new pod's service: %v", err)
	}
}

func testNodeRelease(t *testing.T, e *nodeEnv, st *stepState) {
	ctx := context.Background()
	gone := func(name string, uid types.UID) {
		t.Helper()
		waitFor(t, "pod and service "+name+" deleted (and the kubelet done with the pod)", 2*time.Minute, func() (bool, string) {
			p, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.UID == uid {
				return false, "pod " + podState(p)
			}
			if _, err := e.n.admin.CoreV1().Services(manifestNamespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("service: %v", err)
			}
			return true, ""
		})
	}
	if err := st.pA.Release(ctx, st.sidA); err != nil {
		t.Fatalf("release %s: %v", st.sidA, err)
	}
	gone(st.podA.Name, st.podA.UID)

	// The idle reaper (sage-provisioner --idle-ttl): thread-b's sandbox has
	// had no activity through the provisioner for longer than the TTL.
	pod := e.onePod(t, st.threadB)
	time.Sleep(50 * time.Millisecond)
	reaped, err := e.backend.Reap(ctx, ReapOptions{TTL: 10 * time.Millisecond})
	if err != nil || !slices.Contains(reaped, pod.Name) {
		t.Fatalf("Reap %v, %v: want %s", reaped, err, pod.Name)
	}
	gone(pod.Name, pod.UID)
	if ps := e.threadPods(t, "thread-a"); len(ps) != 0 {
		t.Fatalf("pods of thread-a after its release: %v", podNames(ps))
	}
}

func hostKernel(t testing.TB) string {
	t.Helper()
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

func testNodeKubeletRestart(t *testing.T, e *nodeEnv, st *stepState) {
	ctx := context.Background()
	sid, err := st.pA.Acquire(ctx, st.threadB)
	if err != nil {
		t.Fatal(err)
	}
	before := e.onePod(t, st.threadB)
	sb, ok := st.pA.Get(sid)
	if !ok {
		t.Fatalf("no handle for %s", sid)
	}
	run := func(when string) {
		t.Helper()
		res, err := sb.ExecuteCommand(ctx, "hostname", sandbox.ExecOptions{})
		if err != nil || strings.TrimSpace(res.Stdout) != before.Name {
			t.Fatalf("command %s: %+v, %v", when, res, err)
		}
	}
	e.n.stopProc("kubelet", 0) // SIGKILL at once
	run("with the kubelet dead (the containers do not need it)")
	e.n.restartKubelet(t)
	e.n.waitNodeReady(t, 3*time.Minute)
	waitFor(t, "pod "+before.Name+" Ready again under the new kubelet", 2*time.Minute, func() (bool, string) {
		p, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podReady(p)
	})
	after := e.onePod(t, st.threadB)
	if after.UID != before.UID || len(after.Status.ContainerStatuses) != 1 || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("after the kubelet's restart: pod %s restarts %+v; want pod %s adopted, not restarted", after.UID, after.Status.ContainerStatuses, before.UID)
	}
	run("after the kubelet's restart")
	if got, err := st.pA.Acquire(ctx, st.threadB); err != nil || got != sid {
		t.Fatalf("acquire after the kubelet's restart: %s, %v; want %s", got, err, sid)
	}
}
