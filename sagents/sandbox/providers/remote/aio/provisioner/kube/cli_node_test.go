//go:build linux

package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
)

func TestMain(m *testing.M) {
	if os.Getenv(poolChildEnv) != "" {
		os.Exit(runPoolChild())
	}
	code := m.Run()
	testenv.RemoveSageBinary()
	os.Exit(code)
}

// startSageProvisioner runs the real bin/sage-provisioner (built from
// ./cmd/sage-provisioner) with --backend kubernetes against the node,
// as the provisioner's ServiceAccount, and returns its URL; t's cleanup
// stops it (SIGTERM, then SIGKILL) and checks that it exited.
func (e *nodeEnv) startSageProvisioner(t *testing.T) string {
	t.Helper()
	bin, err := testenv.Build("./cmd/sage-provisioner", "sage-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.n.writeKubeconfigFor(t, "provisioner", e.provToken)
	cmd := exec.Command(bin, "--backend", "kubernetes", "--kubeconfig", kubeconfig, "--namespace", manifestNamespace,
		"--pod-address", "--image", nodeImage, "--drop-unlisted-mounts", "--listen", "127.0.0.1:0")
	cmd.SysProcAttr = testenv.ChildAttr(true)
	var logs testenv.Buffer
	cmd.Stderr = &logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(io.LimitReader(out, 1<<20))
		for s.Scan() {
			if u, ok := strings.CutPrefix(s.Text(), "listening "); ok {
				lines <- u
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Errorf("sage-provisioner did not stop on SIGTERM within 10 s\n%s", logs.String())
		}
	})
	select {
	case u := <-lines:
		return u
	case err := <-done:
		t.Fatalf("sage-provisioner exited: %v\n%s", err, logs.String())
	case <-time.After(time.Minute):
		t.Fatalf("sage-provisioner printed no address in a minute\n%s", logs.String())
	}
	return ""
}

type cliResult struct {
	stdout, stderr string
	err            error
}

// sage runs the real sage CLI in remote mode (the aio provider on
// provisioner_url, from $SAGE_PROVISIONER_URL) with home as SAGE_HOME.
func (e *nodeEnv) sage(t *testing.T, home, provURL, stdin string, args ...string) cliResult {
	t.Helper()
	bin, err := testenv.SageBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SAGE_HOME="+home, "SAGE_REMOTE_PROVIDER=aio", "SAGE_REMOTE_URL=",
		"SAGE_PROVISIONER_URL="+provURL, "SAGE_PROVISIONER_API_KEY=")
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if stderr.Len() > 0 { // which process did what, when a later one fails
		t.Logf("sage %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return cliResult{stdout.String(), stderr.String(), err}
}

// testNodeCLI: the user's path. The real sage-provisioner --backend
// kubernetes serves the node; `sage exec --mode remote --session S`
// (aio provider, provisioner_url) runs a command in S's sandbox Pod,
// `sage fs write` and `sage fs read` work on its files, each a process of
// its own on the same Pod, and `sage sandbox rm S` deletes it.
func testNodeCLI(t *testing.T, e *nodeEnv, _ *stepState) {
	ctx := context.Background()
	provURL := e.startSageProvisioner(t)
	home := t.TempDir()
	const thread = "cli-thread"
	remote := []string{"--mode", "remote", "--remote-provider", "aio", "--session", thread}
	t0 := time.Now()
	r := e.sage(t, home, provURL, "", append(append([]string{"exec"}, remote...), "--", "hostname; id -u; echo $((6*7))")...)
	if r.err != nil {
		t.Fatalf("sage exec --mode remote: %v\nstdout %s\nstderr %s\n%s", r.err, r.stdout, r.stderr, e.n.logTails())
	}
	t.Logf("sage exec --mode remote (a new thread: cold acquire through sage-provisioner, the command, the CLI's exit): %s", time.Since(t0).Round(time.Millisecond))
	pod := e.onePod(t, thread)
	if got := strings.Fields(r.stdout); len(got) != 3 || got[0] != pod.Name || got[1] != "1000" || got[2] != "42" {
		t.Fatalf("sage exec printed %q: want the pod's hostname %s, uid 1000, 42", r.stdout, pod.Name)
	}
	const file = "/mnt/user-data/workspace/cli.txt"
	if r := e.sage(t, home, provURL, "written by sage fs\n", append(append([]string{"fs", "write"}, remote...), file)...); r.err != nil {
		t.Fatalf("sage fs write: %v\n%s", r.err, r.stderr)
	}
	r = e.sage(t, home, provURL, "", append(append([]string{"fs", "read"}, remote...), file)...)
	if r.err != nil || r.stdout != "written by sage fs\n" {
		t.Fatalf("sage fs read: %q, %v\n%s", r.stdout, r.err, r.stderr)
	}
	r = e.sage(t, home, provURL, "", append(append([]string{"exec"}, remote...), "--", "cat "+file+"; hostname")...)
	if r.err != nil || r.stdout != "written by sage fs\n"+pod.Name+"\n" {
		t.Fatalf("sage exec cat: %q, %v\n%s", r.stdout, r.err, r.stderr)
	}
	if after := e.onePod(t, thread); after.UID != pod.UID {
		t.Fatalf("thread %s's pod changed between CLI processes: %s -> %s", thread, pod.UID, after.UID)
	}
	if r := e.sage(t, home, provURL, "", "sandbox", "rm", thread); r.err != nil {
		t.Fatalf("sage sandbox rm: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	waitFor(t, "pod "+pod.Name+" deleted after sage sandbox rm", 2*time.Minute, func() (bool, string) {
		p, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.UID == pod.UID {
			return false, "pod " + podState(p)
		}
		return true, ""
	})
}

// testNodeContainerKilled: the sandbox's container SIGKILLed through
// the node's containerd (ctr tasks kill) while the provider holds it:
// a command meanwhile answers or fails with an error within its
// deadline (never hangs); the kubelet restarts the container in the same
// Pod (restartPolicy Always), whose emptyDir workspace keeps the file
// written before; the provider's next acquire is the same sandbox and
// runs commands again. Release then deletes the Pod.
func testNodeContainerKilled(t *testing.T, e *nodeEnv, _ *stepState) {
	ctx := context.Background()
	p := e.provider(t)
	sid, err := p.Acquire(ctx, "thread-kill")
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := p.Get(sid)
	if err := sb.WriteFile(ctx, nodeFile, []byte("before the kill"), sandbox.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := e.onePod(t, "thread-kill")
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v", pod.Status.ContainerStatuses)
	}
	cid, ok := strings.CutPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if !ok {
		t.Fatalf("container id %q: want containerd://...", pod.Status.ContainerStatuses[0].ContainerID)
	}
	out, err := exec.Command("ctr", "--address", e.n.sock, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", cid).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr tasks kill: %v\n%s", err, out)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t0 := time.Now()
	res, err := sb.ExecuteCommand(cctx, "hostname", sandbox.ExecOptions{})
	cancel()
	if err != nil {
		t.Logf("a command right after the kill: %v (after %s)", err, time.Since(t0).Round(time.Millisecond))
	} else if t.Logf("a command right after the kill: %q (after %s)", res.Stdout, time.Since(t0).Round(time.Millisecond)); strings.TrimSpace(res.Stdout) != pod.Name {
		t.Fatalf("a command right after the kill printed %q with no error", res.Stdout)
	}
	waitFor(t, "the kubelet restarting the killed container, Ready again", 3*time.Minute, func() (bool, string) {
		got, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if got.UID != pod.UID {
			return false, "pod replaced"
		}
		cs := got.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].RestartCount < 1 {
			return false, fmt.Sprintf("statuses %+v", cs)
		}
		return podReady(got)
	})
	got, err := p.Acquire(ctx, "thread-kill")
	if err != nil || got != sid {
		t.Fatalf("acquire after the container's restart: %s, %v; want %s", got, err, sid)
	}
	sb, _ = p.Get(sid)
	var res2 *sandbox.CommandResult
	waitFor(t, "a command in the restarted container", time.Minute, func() (bool, string) {
		res2, err = sb.ExecuteCommand(ctx, "cat "+nodeFile+"; echo; hostname", sandbox.ExecOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if res2.Stdout != "before the kill\n"+pod.Name+"\n" {
		t.Fatalf("after the restart: %q; want the emptyDir's file and the same pod's hostname", res2.Stdout)
	}
	if err := p.Release(ctx, sid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod "+pod.Name+" deleted after release", 2*time.Minute, func() (bool, string) {
		p, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.UID == pod.UID {
			return false, "pod " + podState(p)
		}
		return true, ""
	})
}
