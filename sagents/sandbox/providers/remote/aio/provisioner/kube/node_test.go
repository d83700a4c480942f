//go:build linux

package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sage-go/sage/internal/testenv"
)

// This file runs a real single-node cluster for TestRealNode: the control
// plane of startControlPlane (etcd, kube-apiserver) plus
// kube-controller-manager, kube-scheduler, a containerd of its own (its
// own socket and directories under the test's temp dir, Debian's runc, a
// CNI bridge on a private /24 with no masquerade and no default route, so
// pod traffic never leaves the machine) and a kubelet. The sandbox image
// is imported from Docker. Teardown removes every pod sandbox through the
// CRI (containers, network namespaces, veths), stops the processes, and
// removes the bridge, the kubelet's cgroups and iptables chains; then it
// checks that nothing of the node is left.

const runscFix = "run `bash .ci/setup.d/50-runsc.sh` (builds the project's pinned runsc into ~/.cache/sage and installs it as /usr/local/bin/runsc)"

const nodeFix = "run `make kube` (.ci/setup.d/35-kube.sh: builds kubelet, kube-scheduler and kube-controller-manager into ~/.cache/sage/kube-node-VERSION and installs etcd-server, containerd, runc and containernetworking-plugins)"

// nodeImage is the sandbox image the node runs, imported from Docker.
const nodeImage = "sage-sandbox:minimal"

// process is a running program of the node, in its own process group,
// logging to its file; stop kills the group and waits (idempotent).
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	logf *os.File
}

func startProcess(t testing.TB, dir, name, bin string, args ...string) *process {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = testenv.ChildAttr(true)
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), logf: logf}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

// stop sends SIGTERM to the group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // the group's stragglers
	p.logf.Close()
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// realNode is the running cluster.
type realNode struct {
	cp         *controlPlane
	admin      kubernetes.Interface
	dir        string
	name       string // the Node's name
	sock       string // containerd's socket
	bridge     string
	subnet     *net.IPNet
	cgroupRoot string // under each cgroup v1 hierarchy (or the v2 root)
	kubeletBin string
	kubeletCfg []string // kubelet's arguments

	mu       sync.Mutex
	procs    map[string]*process
	started  map[string]time.Duration // how long each part took to start
	preNetns map[string]bool
	preIPT   map[string]bool
	madeRun  []string // directories under /run this node created
}

// nodeBinaries finds what the node runs, or stops t through
// testenv.Missing naming the setup step.
func nodeBinaries(t testing.TB) (dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (kubelet and containerd run as root)", "run the test as root, as CI does")
	}
	dir = os.Getenv("SAGE_KUBE_NODE_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			testenv.Missing(t, "a cache directory for the node binaries", nodeFix)
		}
		dir = filepath.Join(cache, "sage", "kube-node-"+kubeVersion(t))
	}
	for _, b := range []string{"kubelet", "kube-scheduler", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			testenv.Missing(t, b+" "+kubeVersion(t)+" ("+filepath.Join(dir, b)+")", nodeFix)
		}
	}
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "iptables", "docker"} {
		testenv.Command(t, c, nodeFix)
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			testenv.Missing(t, "the CNI plugin "+p+" in "+cniBinDir, nodeFix)
		}
	}
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", nodeImage).CombinedOutput(); err != nil {
		testenv.Missing(t, "the Docker image "+nodeImage+" ("+strings.TrimSpace(string(out))+")", "run `make image-minimal` (sage image build --minimal; .ci/setup.d/25-image.sh builds it)")
	}
	return dir
}

const cniBinDir = "/usr/lib/cni"

// startNode starts the whole node and waits (bounded) until its Node is
// Ready; t's cleanup tears it down and checks that nothing is left.
func startNode(t testing.TB) *realNode {
	t.Helper()
	binDir := nodeBinaries(t)
	t0 := time.Now()
	cp := startControlPlane(t)
	n := &realNode{cp: cp, admin: cp.clientset(t, cp.token), dir: t.TempDir(), procs: map[string]*process{},
		started: map[string]time.Duration{"control plane (etcd, kube-apiserver)": time.Since(t0)},
		name:    fmt.Sprintf("sage-node-%04x", rand.IntN(1<<16)), kubeletBin: filepath.Join(binDir, "kubelet")}
	n.bridge = "sagek" + n.name[len(n.name)-4:]
	n.cgroupRoot = "/sage-" + n.name
	n.subnet = freeSubnet(t)
	n.preNetns = dirNames("/run/netns")
	n.preIPT = iptablesChains()
	t.Cleanup(func() { n.teardown(t) })

	kubeconfig := n.writeKubeconfig(t)
	for _, c := range []struct{ name, sub string }{{"kube-controller-manager", "kcm"}, {"kube-scheduler", "sched"}} {
		port := freePort(t)
		args := []string{"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1",
			"--secure-port=" + port, "--v=1"}
		if c.name == "kube-controller-manager" {
			args = append(args, "--cert-dir="+filepath.Join(n.dir, c.sub), "--use-service-account-credentials=false",
				"--service-account-private-key-file="+filepath.Join(cp.logDir, "sa.key"),
				"--service-cluster-ip-range=10.96.0.0/24", "--node-monitor-grace-period=20s")
		} else {
			args = append(args, "--cert-dir="+filepath.Join(n.dir, c.sub))
		}
		t1 := time.Now()
		n.start(t, c.name, filepath.Join(binDir, c.name), args...)
		n.waitHealthz(t, c.name, "https://127.0.0.1:"+port+"/healthz")
		n.started[c.name] = time.Since(t1)
	}

	t1 := time.Now()
	n.startContainerd(t)
	n.started["containerd"] = time.Since(t1)
	t1 = time.Now()
	n.importImages(t)
	n.started["image import (docker save | ctr import)"] = time.Since(t1)

	t1 = time.Now()
	n.kubeletCfg = n.writeKubeletConfig(t, kubeconfig)
	n.start(t, "kubelet", n.kubeletBin, n.kubeletCfg...)
	n.waitNodeReady(t, 3*time.Minute)
	n.started["kubelet to Node Ready"] = time.Since(t1)
	n.started["whole node"] = time.Since(t0)
	return n
}

func (n *realNode) start(t testing.TB, name, bin string, args ...string) {
	t.Helper()
	p := startProcess(t, n.dir, name, bin, args...)
	n.mu.Lock()
	n.procs[name] = p
	n.mu.Unlock()
}

func (n *realNode) proc(name string) *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.procs[name]
}

// stopProc stops one of the node's programs.
func (n *realNode) stopProc(name string, grace time.Duration) {
	if p := n.proc(name); p != nil {
		p.stop(grace)
	}
}

// logTail is the last lines of one program's log.
func (n *realNode) logTail(name string, lines int) string {
	data, _ := os.ReadFile(filepath.Join(n.dir, name+".log"))
	l := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return fmt.Sprintf("--- %s.log (tail)\n%s\n", name, strings.Join(l, "\n"))
}

// logTails is the tails of every log, for failure messages.
func (n *realNode) logTails() string {
	var b strings.Builder
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "containerd", "kubelet"} {
		b.WriteString(n.logTail(name, 25))
	}
	return b.String()
}

func (n *realNode) writeKubeconfig(t testing.TB) string {
	t.Helper()
	return n.writeKubeconfigFor(t, "admin", n.cp.token)
}

// writeKubeconfigFor writes a kubeconfig for the API server with token
// (user is the file's name too).
func (n *realNode) writeKubeconfigFor(t testing.TB, user, token string) string {
	t.Helper()
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "node",
		"clusters": []any{map[string]any{"name": "node", "cluster": map[string]any{"server": n.cp.host,
			"certificate-authority-data": n.cp.caPEM}}},
		"users":    []any{map[string]any{"name": "admin", "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "node", "context": map[string]any{"cluster": "node", "user": "admin"}}},
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(n.dir, user+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitHealthz polls a component's /healthz (its self-signed certificate).
func (n *realNode) waitHealthz(t testing.TB, name, url string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var last string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if p := n.proc(name); p != nil && p.exited() {
			t.Fatalf("%s exited while starting\n%s", name, n.logTail(name, 40))
		}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
	}
	t.Fatalf("%s not healthy at %s after 3 minutes (last: %s)\n%s", name, url, last, n.logTail(name, 40))
}

// freeSubnet picks a 10.123.N.0/24 that no address or route of this
// machine touches (another test's node may use one).
func freeSubnet(t testing.TB) *net.IPNet {
	t.Helper()
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v\n%s", err, out)
	}
	addrs, _ := exec.Command("ip", "-4", "-o", "addr").CombinedOutput()
	used := string(out) + string(addrs)
	for range 100 {
		third := 16 + rand.IntN(224)
		prefix := fmt.Sprintf("10.123.%d.", third)
		if !strings.Contains(used, prefix) {
			_, n, _ := net.ParseCIDR(prefix + "0/24")
			return n
		}
	}
	t.Fatal("no free 10.123.N.0/24 for the pod network")
	return nil
}

// runscForShim is the program containerd's runc shim runs in runc's
// place for the runtime handler runsc: runsc, with two changes for a
// Pod's second container (the sandbox's, which joins the gVisor sandbox
// the pause container started), where the shim's runc assumptions do
// not hold (seen with containerd 1.6.20):
//   - `runsc start` of it starts its gofer, which inherits runsc's stdout
//     and stderr; the shim reads those to EOF, which never comes while
//     the gofer runs, so StartContainer never returned. start runs with
//     its output in a file the shim then gets.
//   - its pid file names the gVisor sandbox's process (the pause
//     container's), which the shim watches for the container's exit:
//     StopContainer waited forever. create writes instead the pid of a
//     waiter (`runsc wait`, reparented to the shim, its subreaper) that
//     exits with the container's exit status (runsc wait refuses a
//     container not started yet: it polls runsc state until then).
//   - the CRI's stop of the pause container kills every process of it
//     once the gVisor sandbox has gone with it, and runsc answers "sandbox
//     is not running" (runc's "container not running" the shim takes as
//     done): StopPodSandbox failed forever. kill of what runs no more
//     succeeds.
//
// Every other command is runsc itself. gVisor's own shim
// (containerd-shim-runsc-v1) needs neither, but does not run here (see
// deploy/kubernetes/README.md).
const runscForShim = `#!/bin/sh
runsc=%q
root= cmd= bundle= pidfile= skip= id=
for a in "$@"; do
	if [ -n "$skip" ]; then
		case $skip in --root) root=$a ;; --bundle) bundle=$a ;; --pid-file) pidfile=$a ;; esac
		skip=
		continue
	fi
	case $a in
	--root|--log|--log-format|--bundle|--pid-file|--console-socket) skip=$a ;;
	-*) ;;
	*) if [ -z "$cmd" ]; then cmd=$a; else id=$a; fi ;;
	esac
done
case $cmd in
start)
	out=$(mktemp) || exit 1
	"$runsc" "$@" >"$out" 2>&1 </dev/null
	rc=$?
	cat "$out"
	rm -f "$out"
	exit $rc
	;;
create)
	"$runsc" "$@" || exit $?
	if [ -n "$pidfile" ] && grep -q '"io.kubernetes.cri.container-type": *"container"' "$bundle/config.json"; then
		(
			n=0
			while st=$("$runsc" --root "$root" state "$id" 2>/dev/null); do
				case $st in *'"status": "created"'* | *'"status":"created"'*) ;; *) break ;; esac
				n=$((n + 1))
				[ "$n" -lt 2400 ] || exit 255
				sleep 0.05
			done
			s=$("$runsc" --root "$root" wait "$id" 2>/dev/null | sed -n 's/.*"exitStatus": *\([0-9]*\).*/\1/p')
			exit "${s:-255}"
		) </dev/null >/dev/null 2>&1 &
		printf %%s "$!" >"$pidfile"
	fi
	exit 0
	;;
kill)
	out=$("$runsc" "$@" 2>&1) && exit 0
	rc=$?
	case $out in *"is not running"*) exit 0 ;; esac
	printf '%%s\n' "$out" >&2
	exit $rc
	;;
esac
exec "$runsc" "$@"
`

// writeRunscForShim writes runscForShim for runsc into dir.
func writeRunscForShim(t testing.TB, dir, runsc string) string {
	t.Helper()
	p := filepath.Join(dir, "runsc-for-shim")
	if err := os.WriteFile(p, fmt.Appendf(nil, runscForShim, runsc), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func (n *realNode) startContainerd(t testing.TB) {
	t.Helper()
	cd := filepath.Join(n.dir, "containerd")
	netd := filepath.Join(n.dir, "cni", "net.d")
	for _, d := range []string{cd, netd} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"/run/containerd", "/run/netns"} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			n.madeRun = append(n.madeRun, d)
		}
	}
	n.sock = filepath.Join(n.dir, "containerd.sock")
	gw := slices.Clone(n.subnet.IP.To4())
	gw[3] = 1
	cni := map[string]any{"cniVersion": "0.4.0", "name": "sage-" + n.name, "plugins": []any{map[string]any{
		"type": "bridge", "bridge": n.bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
		"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": n.subnet.String(), "gateway": gw.String()}}},
			"dataDir": filepath.Join(n.dir, "cni", "ipam")}}}}
	data, _ := json.MarshalIndent(cni, "", "  ")
	if err := os.WriteFile(filepath.Join(netd, "10-sage.conflist"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so runc
	// cannot set the negative oom_score_adj the kubelet asks for.
	// The runtime "runsc" (the handler of the RuntimeClass gvisor of
	// deploy/kubernetes/runtimeclass-gvisor.yaml) is containerd's runc
	// shim running runsc in runc's place (BinaryName), as the Docker
	// Engine runs its runsc runtime: gVisor's own shim
	// (containerd-shim-runsc-v1) at the project's pinned version sets an
	// oom_score_adj of -999 for itself, which fails here the same way,
	// and does not speak containerd 1.6's start handshake.
	runscBin := writeRunscForShim(t, cd, testenv.Command(t, "runsc", runscFix))
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  max_container_log_line_size = 16384

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  Root = %q
  SystemdCgroup = false
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
  BinaryName = %q
  Root = %q
  SystemdCgroup = false
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = %q
  conf_dir = %q
  max_conf_num = 1
`, filepath.Join(cd, "root"), filepath.Join(cd, "state"), n.sock, filepath.Join(cd, "opt"), "docker.io/library/"+n.pauseImage(),
		filepath.Join(cd, "runtime-runc"), runscBin, filepath.Join(cd, "runtime-runsc"), cniBinDir, netd)
	cfg := filepath.Join(cd, "config.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n.start(t, "containerd", "containerd", "--config", cfg, "--log-level", "info")
	// Bounded: the CRI answers Version and its runtime is ready.
	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if n.proc("containerd").exited() {
			t.Fatalf("containerd exited while starting\n%s", n.logTail("containerd", 40))
		}
		last = n.cri(func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
			st, err := rs.Status(ctx, &runtimeapi.StatusRequest{})
			if err != nil {
				return err
			}
			for _, c := range st.GetStatus().GetConditions() {
				if c.Type == runtimeapi.RuntimeReady && !c.Status {
					return fmt.Errorf("runtime not ready: %s", c.Message)
				}
			}
			return nil
		})
		if last == nil {
			return
		}
	}
	t.Fatalf("containerd's CRI not ready at %s after 2 minutes: %v\n%s", n.sock, last, n.logTail("containerd", 40))
}

// pauseImage is the pod sandbox ("pause") image: no registry is reachable,
// so it is the sandbox image with sleep as its entrypoint, built here.
func (n *realNode) pauseImage() string { return "sage-pause-" + n.name[len(n.name)-4:] + ":test" }

// cri calls f with the CRI runtime client of the node's containerd.
func (n *realNode) cri(f func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error) error {
	conn, err := grpc.NewClient("unix://"+n.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f(ctx, runtimeapi.NewRuntimeServiceClient(conn))
}

// importImages builds the pause image in Docker, saves it with the
// sandbox image into the node's containerd (namespace k8s.io, as the CRI
// reads), and removes it from Docker again.
func (n *realNode) importImages(t testing.TB) {
	t.Helper()
	pause := n.pauseImage()
	build := exec.Command("docker", "build", "-q", "-t", pause, "-")
	build.Stdin = strings.NewReader("FROM " + nodeImage + "\nENTRYPOINT [\"/bin/sleep\", \"2147483647\"]\nCMD []\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build of the pause image: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command("docker", "rmi", pause).CombinedOutput(); err != nil {
			t.Errorf("docker rmi %s: %v\n%s", pause, err, out)
		}
	}()
	save := exec.Command("docker", "save", nodeImage, pause)
	imp := exec.Command("ctr", "--address", n.sock, "-n", "k8s.io", "images", "import", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var saveErr, impOut bytes.Buffer
	save.Stderr = &saveErr
	imp.Stdin, imp.Stdout, imp.Stderr = pipe, &impOut, &impOut
	if err := save.Start(); err != nil {
		t.Fatal(err)
	}
	ierr := imp.Run()
	serr := save.Wait()
	if serr != nil || ierr != nil {
		t.Fatalf("docker save %s %s | ctr images import: save %v (%s), import %v (%s)", nodeImage, pause, serr, saveErr.String(), ierr, impOut.String())
	}
}

func (n *realNode) writeKubeletConfig(t testing.TB, kubeconfig string) []string {
	t.Helper()
	kd := filepath.Join(n.dir, "kubelet")
	if err := os.MkdirAll(filepath.Join(kd, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := n.makeCgroupRoot(); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		// This machine is cgroup v1; kubelet refuses it unless told not to.
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": n.cgroupRoot, "failSwapOn": false,
		"containerRuntimeEndpoint": "unix://" + n.sock,
		"address":                  "127.0.0.1", "port": mustAtoi(t, freePort(t)), "readOnlyPort": 0,
		"healthzBindAddress": "127.0.0.1", "healthzPort": mustAtoi(t, freePort(t)),
		"authentication": map[string]any{"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": false}},
		"authorization":  map[string]any{"mode": "AlwaysAllow"},
		"podLogsDir":     filepath.Join(kd, "logs"), "staticPodPath": "", "registerNode": true,
		"serializeImagePulls": false, "maxPods": 30, "resolvConf": "",
		// Others' tests fill this machine's disk and memory: no eviction, no image GC.
		"evictionHard":                map[string]any{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		"imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
		"nodeStatusUpdateFrequency": "2s", "syncFrequency": "10s",
		"fileCheckFrequency": "20s", "httpCheckFrequency": "20s",
	}
	data, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(kd, "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--config=" + path, "--kubeconfig=" + kubeconfig, "--hostname-override=" + n.name,
		"--root-dir=" + filepath.Join(kd, "root"), "--cert-dir=" + filepath.Join(kd, "pki"), "--v=1"}
}

func mustAtoi(t testing.TB, s string) int {
	t.Helper()
	var v int
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// cgroupHierarchies are the mounted cgroup hierarchies: the v1 ones
// (cgroup, named ones included) and the unified one.
func cgroupHierarchies() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && (fields[i+1] == "cgroup" || fields[i+1] == "cgroup2") {
				out = append(out, fields[4])
			}
		}
	}
	return out
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy
// (the kubelet requires it to exist).
func (n *realNode) makeCgroupRoot() error {
	for _, h := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(h, n.cgroupRoot), 0o755); err != nil {
			return fmt.Errorf("cgroup root in %s: %w", h, err)
		}
	}
	return nil
}

// waitNodeReady polls the Node until it is Ready, within d.
func (n *realNode) waitNodeReady(t testing.TB, d time.Duration) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if p := n.proc("kubelet"); p != nil && p.exited() {
			t.Fatalf("kubelet exited\n%s", n.logTail("kubelet", 60))
		}
		node, err := n.admin.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			continue
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
				if c.Status == corev1.ConditionTrue {
					return
				}
			}
		}
	}
	t.Fatalf("node %s not Ready after %s (last: %s)\n%s", n.name, d, last, n.logTails())
}

// restartKubelet starts the kubelet again with the same configuration.
func (n *realNode) restartKubelet(t testing.TB) {
	t.Helper()
	n.start(t, "kubelet", n.kubeletBin, n.kubeletCfg...)
}

// teardown removes the node: every pod sandbox through the CRI (which
// stops the containers and removes their network namespaces and veths),
// then the processes, the bridge, the cgroups and the kubelet's iptables
// chains; then it checks that nothing is left (t.Errorf for what is).
func (n *realNode) teardown(t testing.TB) {
	n.stopProc("kubelet", 10*time.Second)
	n.stopProc("kube-scheduler", 5*time.Second)
	n.stopProc("kube-controller-manager", 5*time.Second)
	var netns []string
	if p := n.proc("containerd"); p != nil && !p.exited() {
		err := n.cri(func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
			l, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			if err != nil {
				return err
			}
			for _, s := range l.Items {
				if st, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s.Id, Verbose: true}); err == nil {
					netns = append(netns, netnsOf(st.GetInfo()["info"])...)
				}
				if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
					return fmt.Errorf("stop pod sandbox %s: %w", s.Id, err)
				}
				if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
					return fmt.Errorf("remove pod sandbox %s: %w", s.Id, err)
				}
			}
			cl, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			if err != nil {
				return err
			}
			if len(cl.Containers) != 0 {
				return fmt.Errorf("%d containers left after removing every pod sandbox", len(cl.Containers))
			}
			return nil
		})
		if err != nil {
			t.Errorf("teardown through the CRI: %v\n%s", err, n.logTail("containerd", 30))
		}
	}
	n.stopProc("containerd", 15*time.Second)

	// The kubelet's own: it bind-mounts its root directory on itself (to
	// make it rshared for mount propagation).
	for _, m := range slices.Backward(mountsUnder(filepath.Join(n.dir, "kubelet"))) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", m, err)
		}
	}
	// The shims exit once their tasks are deleted; give them a moment.
	for deadline := time.Now().Add(20 * time.Second); len(processesMentioning(n.dir)) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}

	// runsc keeps one bind mount in its state directory for as long as
	// that directory is in use (the network namespace file its sandboxes
	// without a network of their own join); it is the runtime's, not a
	// Pod's, and goes with the node.
	_ = syscall.Unmount(filepath.Join(n.dir, "containerd", "runtime-runsc", "k8s.io", "null-netns"), syscall.MNT_DETACH)

	// Backstops, each an error when it had anything to do.
	if pids := processesMentioning(n.dir); len(pids) > 0 {
		var desc []string
		for _, pid := range pids {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			desc = append(desc, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("processes of the node outlived it (killed): %s", strings.Join(desc, "; "))
	}
	if ms := mountsUnder(n.dir); len(ms) > 0 {
		for _, m := range slices.Backward(ms) {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
		t.Errorf("mounts of the node outlived it (unmounted): %v", ms)
	}
	for _, ns := range netns {
		if _, err := os.Stat(ns); err == nil {
			_ = syscall.Unmount(ns, syscall.MNT_DETACH)
			_ = os.Remove(ns)
			t.Errorf("network namespace %s outlived its pod sandbox (removed)", ns)
		}
	}
	// The bridge is the CNI plugin's, made on the first pod: it stays.
	if exec.Command("ip", "link", "show", n.bridge).Run() == nil {
		if out, err := exec.Command("ip", "link", "del", n.bridge).CombinedOutput(); err != nil {
			t.Errorf("ip link del %s: %v\n%s", n.bridge, err, out)
		}
	}
	if err := n.removeCgroups(); err != nil {
		t.Errorf("cgroups: %v", err)
	}
	for chain := range iptablesChains() {
		if !n.preIPT[chain] {
			f := strings.Fields(chain)
			tool, table, name := f[0], f[1], f[2]
			deleteJumps(tool, table, name)
			_ = exec.Command(tool, "-w", "5", "-t", table, "-F", name).Run()
			if out, err := exec.Command(tool, "-w", "5", "-t", table, "-X", name).CombinedOutput(); err != nil {
				t.Errorf("%s -t %s -X %s: %v\n%s", tool, table, name, err, out)
			}
		}
	}
	for _, d := range slices.Backward(n.madeRun) {
		removeEmptyTree(d)
	}

	// Check: nothing of the node is left.
	var left []string
	if pids := processesMentioning(n.dir); len(pids) > 0 {
		left = append(left, fmt.Sprintf("processes %v", pids))
	}
	if ms := mountsUnder(n.dir); len(ms) > 0 {
		left = append(left, fmt.Sprintf("mounts %v", ms))
	}
	if exec.Command("ip", "link", "show", n.bridge).Run() == nil {
		left = append(left, "bridge "+n.bridge)
	}
	if out, _ := exec.Command("ip", "-o", "link", "show", "type", "veth").CombinedOutput(); strings.Contains(string(out), "master "+n.bridge) {
		left = append(left, "veths on "+n.bridge)
	}
	for ns := range dirNames("/run/netns") {
		if !n.preNetns[ns] && slices.Contains(netns, filepath.Join("/run/netns", ns)) {
			left = append(left, "netns "+ns)
		}
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, n.cgroupRoot)); err == nil {
			left = append(left, "cgroup "+filepath.Join(h, n.cgroupRoot))
		}
	}
	for chain := range iptablesChains() {
		if !n.preIPT[chain] {
			left = append(left, "iptables chain "+chain)
		}
	}
	if len(left) > 0 {
		t.Errorf("left behind by the node: %s", strings.Join(left, "; "))
	}
}

// netnsOf finds the network namespace paths in a pod sandbox's verbose
// CRI info (its runtime spec).
func netnsOf(info string) []string {
	var v struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if json.Unmarshal([]byte(info), &v) != nil {
		return nil
	}
	var out []string
	for _, ns := range v.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			out = append(out, ns.Path)
		}
	}
	return out
}

// removeCgroups removes the kubelet's cgroup root, deepest first, in
// every hierarchy (the pods' cgroups are empty once their sandboxes are
// gone).
func (n *realNode) removeCgroups() error {
	var errs []string
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, n.cgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			var err error
			for range 50 { // a just-killed task may linger a moment
				if err = syscall.Rmdir(d); err == nil || os.IsNotExist(err) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("rmdir %s: %v", d, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// processesMentioning lists the pids whose command line mentions s (the
// node's directory: containerd's shims carry its socket).
func processesMentioning(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == self {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmd, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

func dirNames(dir string) map[string]bool {
	ents, _ := os.ReadDir(dir)
	out := map[string]bool{}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

// removeEmptyTree removes dir and its empty subdirectories, nothing else.
func removeEmptyTree(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			removeEmptyTree(filepath.Join(dir, e.Name()))
		}
	}
	_ = syscall.Rmdir(dir)
}

// deleteJumps deletes the rules of table that jump to chain (the
// kubelet's "-A INPUT -j KUBE-FIREWALL" and "-A OUTPUT -j KUBE-FIREWALL").
func deleteJumps(tool, table, chain string) {
	out, err := exec.Command(tool, "-w", "5", "-t", table, "-S").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "-A" || f[1] == chain || !slices.Contains(f, "-j") || f[slices.Index(f, "-j")+1] != chain {
			continue
		}
		_ = exec.Command(tool, append([]string{"-w", "5", "-t", table, "-D"}, f[1:]...)...).Run()
	}
}

// iptablesChains lists "tool table chain" for the chains the kubelet may
// make (KUBE-*), in the tables it uses.
func iptablesChains() map[string]bool {
	out := map[string]bool{}
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"mangle", "nat", "filter"} {
			o, err := exec.Command(tool, "-w", "5", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(o), "\n") {
				if name, ok := strings.CutPrefix(line, "-N "); ok && strings.HasPrefix(name, "KUBE-") {
					out[tool+" "+table+" "+strings.TrimSpace(name)] = true
				}
			}
		}
	}
	return out
}
