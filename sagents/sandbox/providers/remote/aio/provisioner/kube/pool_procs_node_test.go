//go:build linux

package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// The child processes of testNodePoolProcesses: the test binary run again
// with poolChildEnv set, an aio provider with a warm pool on the
// provisioner at poolChildURLEnv.
const (
	poolChildEnv    = "SAGE_KUBE_TEST_POOL_CHILD"
	poolChildURLEnv = "SAGE_KUBE_TEST_POOL_URL"
	poolChildHome   = "SAGE_KUBE_TEST_POOL_HOME"
)

// poolProcs, poolGoroutines, poolThreads: the 8 processes of 64
// goroutines, over 3 threads.
const poolProcs, poolGoroutines, poolThreads = 8, 64, 3

// runPoolChild is a child's body (from TestMain): a provider with a pool
// of 1 and shutdown_policy keep; "ready OWNER" once its pool is full;
// then, at "go" on stdin, 64 goroutines acquire the threads and it
// prints "THREAD SANDBOX POD-IP" for each distinct answer, then "done";
// at "exit" it shuts down (its pool's Pods deleted, the threads' kept)
// and exits 0. The parent kills some with -9 instead.
func runPoolChild() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "pool child:", err); return 1 }
	p, err := orchestrator.ProviderFromConfig(sandbox.RemoteConfig{Provider: "aio", ProviderConfig: map[string]any{
		orchestrator.KeyProvisionerURL: os.Getenv(poolChildURLEnv), orchestrator.KeyHome: os.Getenv(poolChildHome),
		orchestrator.KeyReadyTimeout: "3m", orchestrator.KeyPoolSize: 1, orchestrator.KeyShutdownPolicy: "keep"}},
		orchestrator.ProviderOptions{SweepInterval: -1, Logger: quiet}) // the parent sweeps
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := p.WaitPool(ctx, 1); err != nil {
		return fail(err)
	}
	fmt.Println("ready", p.Owner())
	in := bufio.NewScanner(io.LimitReader(os.Stdin, 1<<10))
	if !in.Scan() || in.Text() != "go" {
		return fail(fmt.Errorf("stdin %q, want go", in.Text()))
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var errs []error
	var wg sync.WaitGroup
	for g := range poolGoroutines {
		wg.Go(func() {
			thread := fmt.Sprintf("thread-pp%d", g%poolThreads)
			sid, err := p.Acquire(ctx, thread)
			var line string
			if err == nil {
				info, _ := p.Info(sid)
				line = thread + " " + sid + " " + info.URL
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("acquire %s: %w", thread, err))
			} else if !seen[line] {
				seen[line] = true
				fmt.Println(line)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fail(errs[0])
	}
	fmt.Println("done")
	if !in.Scan() || in.Text() != "exit" {
		return fail(fmt.Errorf("stdin %q, want exit", in.Text()))
	}
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer scancel()
	if err := p.Shutdown(sctx); err != nil {
		return fail(err)
	}
	return 0
}

type poolChild struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	owner  string
	exited chan struct{} // closed when Wait returned, with err
	err    error
}

// wait waits (bounded by d) for the child's exit and returns its error.
func (c *poolChild) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-c.exited:
		return c.err
	case <-time.After(d):
		t.Fatalf("pool child %s did not exit within %s", c.owner, d)
	}
	return nil
}

func (c *poolChild) line(t *testing.T, what string) string {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		if c.out.Scan() {
			lines <- c.out.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("pool child %s ended before %s: %v", c.owner, what, c.wait(t, time.Minute))
		}
		return l
	case <-time.After(5 * time.Minute):
		t.Fatalf("pool child %s: no %s in 5 minutes", c.owner, what)
	}
	return ""
}

// testNodePoolProcesses: 8 processes, each an aio provider with a warm
// pool of 1 on the real node, 64 goroutines each acquiring 3 threads:
// every thread has one sandbox (one Pod) in all 8 processes, no Pod
// serves two threads. Then four are killed with -9 and four shut down;
// a sweep by another process collects what the dead ones left (their
// unclaimed pool Pods; a thread whose saved state they owned), after a
// sweep while they lived collected nothing (the control). At the end no
// sandbox Pod or Service is left.
func testNodePoolProcesses(t *testing.T, e *nodeEnv, _ *stepState) {
	ctx := context.Background()
	home := t.TempDir()
	children := make([]*poolChild, poolProcs)
	t0 := time.Now()
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), poolChildEnv+"=1", poolChildURLEnv+"="+e.url, poolChildHome+"="+home)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = testenv.ChildAttr(false)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &poolChild{cmd: cmd, in: in, out: bufio.NewScanner(io.LimitReader(out, 1<<20)), exited: make(chan struct{})}
		go func() { c.err = cmd.Wait(); close(c.exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.exited })
		children[i] = c
	}
	for _, c := range children {
		owner, ok := strings.CutPrefix(c.line(t, "ready"), "ready ")
		if !ok || owner == "" {
			t.Fatalf("a pool child said %q, want ready OWNER", owner)
		}
		c.owner = owner
	}
	t.Logf("8 processes' pools of 1 filled in %s", time.Since(t0).Round(time.Millisecond))
	if pods := e.poolPods(t); len(pods) != poolProcs {
		t.Fatalf("%d pool pods, want %d: %v", len(pods), poolProcs, podNames(pods))
	}

	byThread := map[string]map[string]bool{} // thread -> sandbox ids
	bySandbox := map[string]map[string]bool{}
	t0 = time.Now()
	for _, c := range children {
		if _, err := io.WriteString(c.in, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range children {
		for {
			l := c.line(t, "done")
			if l == "done" {
				break
			}
			f := strings.Fields(l)
			if len(f) != 3 {
				t.Fatalf("pool child %s printed %q", c.owner, l)
			}
			if byThread[f[0]] == nil {
				byThread[f[0]] = map[string]bool{}
			}
			if bySandbox[f[1]+" "+f[2]] == nil {
				bySandbox[f[1]+" "+f[2]] = map[string]bool{}
			}
			byThread[f[0]][f[1]+" "+f[2]], bySandbox[f[1]+" "+f[2]][f[0]] = true, true
		}
	}
	t.Logf("8 x 64 goroutines acquired %d threads in %s", poolThreads, time.Since(t0).Round(time.Millisecond))
	if len(byThread) != poolThreads {
		t.Fatalf("threads acquired: %v", byThread)
	}
	for thread, sbs := range byThread {
		if len(sbs) != 1 {
			t.Errorf("thread %s had %d sandboxes over the 8 processes: %v", thread, len(sbs), sbs)
		}
		e.onePod(t, thread)
	}
	for sb, threads := range bySandbox {
		if len(threads) != 1 {
			t.Errorf("sandbox %s served threads %v", sb, threads)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	sweeper, err := orchestrator.ProviderFromConfig(sandbox.RemoteConfig{Provider: "aio", ProviderConfig: map[string]any{
		orchestrator.KeyProvisionerURL: e.url, orchestrator.KeyHome: home, orchestrator.KeyReadyTimeout: "3m"}},
		orchestrator.ProviderOptions{SweepInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := sweeper.Shutdown(sctx); err != nil {
			t.Errorf("sweeper shutdown: %v", err)
		}
	}()
	// The control: every owner lives; a sweep collects nothing.
	if r, err := sweeper.SweepWait(ctx); err != nil || len(r.DeadOwners)+len(r.Sandboxes) != 0 {
		t.Fatalf("a sweep while all 8 live: %+v, %v; want nothing", r, err)
	}

	// Who holds each thread's saved state now that every process has
	// acquired it (the last to take it over).
	store := orchestrator.NewFileStore(home)
	stateOwner := map[string]string{}
	for g := range poolThreads {
		thread := fmt.Sprintf("thread-pp%d", g)
		st, ok, err := store.Load(ctx, thread)
		if err != nil || !ok || st.Owner == "" {
			t.Fatalf("thread %s's saved state: %+v, %v, %v; want one with an owner", thread, st, ok, err)
		}
		stateOwner[thread] = st.Owner
	}
	dead := map[string]bool{}
	for i, c := range children {
		if i%2 == 0 {
			if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = c.wait(t, time.Minute)
			dead[c.owner] = true
			continue
		}
		if _, err := io.WriteString(c.in, "exit\n"); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range children {
		if i%2 == 1 {
			if err := c.wait(t, 3*time.Minute); err != nil {
				t.Fatalf("pool child %s at exit: %v", c.owner, err)
			}
		}
	}
	left := e.poolPods(t)
	var leaked []string
	for _, p := range left {
		if unclaimedPod(&p) {
			if !dead[p.Annotations[annotationOwner]] {
				t.Errorf("unclaimed pool pod %s of owner %s outlived its owner's shutdown", p.Name, p.Annotations[annotationOwner])
			}
			leaked = append(leaked, p.Name)
		}
	}
	t.Logf("after 4 kill -9 and 4 shutdowns: %d unclaimed pool pods left by the dead (%v)", len(leaked), leaked)
	if len(leaked) == 0 {
		t.Fatalf("no unclaimed pool pod outlived the killed processes: the sweep below would prove nothing")
	}
	r, err := sweeper.SweepWait(ctx)
	if err != nil {
		t.Fatalf("sweep after the kills: %v", err)
	}
	t.Logf("sweep: %+v", r)
	// A shut-down owner's lease ended too, so it may be listed (it left
	// the slot directories of the threads it kept); what it kept stays.
	for o := range dead {
		if !slices.Contains(r.DeadOwners, o) {
			t.Errorf("sweep found dead owners %v, not the killed %s", r.DeadOwners, o)
		}
	}
	for thread, owner := range stateOwner {
		swept := slices.Contains(r.States, thread)
		switch {
		case dead[owner] && !swept:
			t.Errorf("thread %s's state, owned by killed %s, was not collected (sweep %+v)", thread, owner, r)
		case !dead[owner] && swept:
			t.Errorf("thread %s's state, kept by %s at its shutdown, was collected", thread, owner)
		case !dead[owner]:
			e.onePod(t, thread) // the kept sandbox is still there
		}
	}
	for _, name := range leaked {
		waitFor(t, "the dead owners' pool pod "+name+" deleted by the sweep", 2*time.Minute, func() (bool, string) {
			p, err := e.n.admin.CoreV1().Pods(manifestNamespace).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp == nil {
				return false, "pod " + podState(p)
			}
			return true, ""
		})
	}
	// What is left are the threads' sandboxes that shut-down processes
	// kept; the sweeper takes each over and deletes it.
	for g := range poolThreads {
		thread := fmt.Sprintf("thread-pp%d", g)
		if err := sweeper.PurgeThread(ctx, thread); err != nil && !errors.Is(err, orchestrator.ErrNoThread) {
			t.Errorf("purge %s: %v", thread, err)
		}
	}
	waitFor(t, "no sandbox pod or service left", 2*time.Minute, func() (bool, string) {
		pods, svcs, err := e.backend.listSandboxObjects(ctx)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, "pod/"+p.Name)
		}
		for _, s := range svcs.Items {
			names = append(names, "service/"+s.Name)
		}
		return len(names) == 0, fmt.Sprint(slices.Sorted(slices.Values(names)))
	})
}
