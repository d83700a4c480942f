//go:build linux

package kube

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// testSweepDeadOwner (issue 35, item 3, "...and Pods"): what a process
// killed with -9 left on Kubernetes is collected by the next live
// process's sweep: a running anonymous sandbox, one whose Service was
// never created (killed between the two creates), and one whose Pod
// ended (Failed). A live owner's sandbox and the sweeper's own are left
// (the controls). The dead owner's lease is what kill -9 leaves of a
// FileStore lease: its lock file, with no flock on it (the flock ended
// with the process).
func testSweepDeadOwner(t *testing.T, e *realEnv) {
	ctx := context.Background()
	b := e.backend(t, nil)
	dir := t.TempDir()
	store := orchestrator.NewFileStore(dir)
	other, err := store.GrantLease(ctx, "owner-alive")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if err := os.WriteFile(filepath.Join(dir, "leases", "owner-dead.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	create := func(id, owner string) orchestrator.SandboxInfo {
		t.Helper()
		info, err := b.Create(ctx, orchestrator.CreateRequest{SandboxID: id, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		e.setStatus(t, info.ContainerName, corev1.PodRunning, true)
		return info
	}
	running := create("swept-running", "owner-dead")
	noService := create("swept-noservice", "owner-dead")
	if err := e.admin.CoreV1().Services(manifestNamespace).Delete(ctx, noService.ContainerName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	failed := create("swept-failed", "owner-dead")
	e.setStatus(t, failed.ContainerName, corev1.PodFailed, false)
	kept := create("kept-alive", "owner-alive")
	own := create("kept-own", "owner-sweeper")

	p, err := orchestrator.NewProvider(orchestrator.ProviderOptions{Backend: b, Store: store, Owner: "owner-sweeper",
		Home: t.TempDir(), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	r, err := p.SweepWait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.DeadOwners, []string{"owner-dead"}) {
		t.Errorf("dead owners %v, want [owner-dead]", r.DeadOwners)
	}
	for _, info := range []orchestrator.SandboxInfo{running, noService, failed} {
		e.gone(t, info.ContainerName)
	}
	for _, info := range []orchestrator.SandboxInfo{kept, own} {
		if _, err := e.pod(t, info.ContainerName); err != nil {
			t.Errorf("control: %s (%s) was swept: %v", info.SandboxID, info.Owner, err)
		}
		if err := b.Destroy(ctx, info); err != nil {
			t.Error(err)
		}
	}
}
