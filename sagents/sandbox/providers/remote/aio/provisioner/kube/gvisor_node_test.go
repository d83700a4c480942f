//go:build linux

package kube

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/provisioner"
)

// testNodeGvisor: a provisioner whose backend has RuntimeClass "gvisor"
// (deploy/kubernetes/runtimeclass-gvisor.yaml, applied with the other
// manifests; its handler runsc is the node's containerd runc shim
// running runsc) makes sandbox Pods of that class; the node runs them
// under gVisor: the command reads gVisor's kernel (its /proc/version and
// boot messages), not the host's, which the runc Pods of the first step
// read (the control); the CRI says the pod sandbox's handler is runsc;
// commands and files work over the pod network; release deletes it.
func testNodeGvisor(t *testing.T, e *nodeEnv, _ *stepState) {
	ctx := context.Background()
	if _, err := e.n.admin.NodeV1().RuntimeClasses().Get(ctx, "gvisor", metav1.GetOptions{}); err != nil {
		t.Fatalf("RuntimeClass gvisor (deploy/kubernetes/runtimeclass-gvisor.yaml): %v", err)
	}
	b, err := New(Options{Client: e.prov, Namespace: manifestNamespace, Image: nodeImage, PullPolicy: corev1.PullNever,
		PodAddress: true, RuntimeClass: "gvisor", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := provisioner.NewServer(provisioner.Options{Backend: b, BackendName: "kubernetes", Logger: quiet,
		Mounts: provisioner.MountPolicy{DropUnlisted: true}, Defaults: provisioner.Defaults{Image: nodeImage}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p, err := orchestrator.ProviderFromConfig(sandbox.RemoteConfig{Provider: "aio", ProviderConfig: map[string]any{
		orchestrator.KeyProvisionerURL: ts.URL, orchestrator.KeyHome: t.TempDir(), orchestrator.KeyReadyTimeout: "3m"}},
		orchestrator.ProviderOptions{LivenessInterval: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			t.Errorf("provider shutdown: %v", err)
		}
	}()

	const thread = "thread-gvisor"
	t0 := time.Now()
	sid, err := p.Acquire(ctx, thread)
	if err != nil {
		t.Fatalf("acquire under RuntimeClass gvisor: %v\n%s", err, e.n.logTails())
	}
	t.Logf("cold acquire of a gVisor Pod (created, scheduled, runsc sandbox started, Ready, API answering): %s", time.Since(t0).Round(time.Millisecond))
	pod := e.onePod(t, thread)
	if rc := pod.Spec.RuntimeClassName; rc == nil || *rc != "gvisor" {
		t.Fatalf("pod %s has runtimeClassName %v, want gvisor", pod.Name, rc)
	}
	if h := e.n.podSandboxHandler(t, pod.UID); h != "runsc" {
		t.Fatalf("the CRI runs pod %s with handler %q, want runsc", pod.Name, h)
	}
	sb, ok := p.Get(sid)
	if !ok {
		t.Fatalf("provider has no handle for %s", sid)
	}
	res, err := sb.ExecuteCommand(ctx, "id -u; hostname; cat /proc/version; dmesg 2>&1 | head -n 3", sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("command in the gVisor pod: %+v, %v", res, err)
	}
	t.Logf("in the gVisor pod: %q", res.Stdout)
	lines := strings.SplitN(res.Stdout, "\n", 4)
	if len(lines) < 4 || lines[0] != "1000" || lines[1] != pod.Name {
		t.Fatalf("command output %q: want uid 1000 and the pod's hostname %s first", res.Stdout, pod.Name)
	}
	if strings.Contains(lines[2], hostKernel(t)) {
		t.Fatalf("/proc/version %q names the host's kernel %s: not under gVisor", lines[2], hostKernel(t))
	}
	if !strings.Contains(strings.ToLower(lines[3]), "gvisor") {
		t.Fatalf("boot messages %q: want gVisor's", lines[3])
	}
	const data = "written under gVisor"
	if err := sb.WriteFile(ctx, nodeFile, []byte(data), sandbox.WriteOptions{}); err != nil {
		t.Fatalf("write a file in the gVisor pod: %v", err)
	}
	if res, err := sb.ExecuteCommand(ctx, "cat "+nodeFile, sandbox.ExecOptions{}); err != nil || res.Stdout != data {
		t.Fatalf("the file seen by a command: %q, %v", res.Stdout, err)
	}
	if err := p.Release(ctx, sid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "gVisor pod "+pod.Name+" deleted after release", 2*time.Minute, func() (bool, string) {
		got, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && got.UID == pod.UID {
			return false, "pod " + podState(got)
		}
		return true, ""
	})
}

// podSandboxHandler is the runtime handler the node's containerd runs
// the pod sandbox of the Pod with uid under ("" when it has none).
func (n *realNode) podSandboxHandler(t testing.TB, uid types.UID) string {
	t.Helper()
	var handler string
	err := n.cri(func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
		l, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return err
		}
		for _, s := range l.Items {
			if s.Metadata != nil && s.Metadata.Uid == string(uid) && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				handler = s.RuntimeHandler
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list pod sandboxes through the CRI: %v", err)
	}
	return handler
}
