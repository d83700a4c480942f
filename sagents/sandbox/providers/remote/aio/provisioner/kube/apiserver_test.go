package kube

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sage-go/sage/internal/testenv"
)

// This file runs a real control plane for the tests: etcd and a
// kube-apiserver built by `make kube` (tools/kube-apiserver) at the
// version of the client-go this module uses, on loopback, with token
// authentication, RBAC and a service-account key pair made here. No
// kubelet, scheduler or controller-manager runs: Pods stay Pending unless
// a test patches their status, and nothing garbage-collects.

const kubeFix = "run `make kube` (builds kube-apiserver into ~/.cache/sage; .ci/setup.sh does it too) and install etcd (Debian: apt-get install etcd-server)"

// controlPlane is a running etcd plus kube-apiserver.
type controlPlane struct {
	host   string // https://127.0.0.1:port
	caPEM  []byte // the serving certificate (self-signed)
	token  string // the admin's bearer token (system:masters)
	logDir string
}

// kubeVersion is the Kubernetes release matching the client-go in the
// module's go.mod (v0.N.M -> v1.N.M), as .ci/setup.d/35-kube.sh derives it.
func kubeVersion(t testing.TB) string {
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/client-go v0\.(\d+\.\d+)\b`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no k8s.io/client-go v0.N.M in go.mod")
	}
	return "v1." + string(m[1])
}

// controlPlaneBinaries finds kube-apiserver and etcd, or stops t through
// testenv.Missing naming `make kube`.
func controlPlaneBinaries(t testing.TB) (apiserver, etcd string) {
	t.Helper()
	apiserver = os.Getenv("SAGE_KUBE_APISERVER_BIN")
	if apiserver == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			testenv.Missing(t, "a cache directory for kube-apiserver", kubeFix)
		}
		apiserver = filepath.Join(cache, "sage", "kube-apiserver-"+kubeVersion(t))
	}
	if _, err := os.Stat(apiserver); err != nil {
		testenv.Missing(t, "kube-apiserver "+kubeVersion(t)+" ("+apiserver+")", kubeFix)
	}
	etcd = os.Getenv("SAGE_ETCD_BIN")
	if etcd == "" {
		etcd = testenv.Command(t, "etcd", kubeFix)
	}
	return apiserver, etcd
}

// startControlPlane starts etcd and kube-apiserver in t's temp dir and
// stops them when t ends. It waits (up to 3 minutes on a loaded machine)
// for /readyz, which includes the RBAC bootstrap roles.
func startControlPlane(t testing.TB) *controlPlane {
	t.Helper()
	apiserverBin, etcdBin := controlPlaneBinaries(t)
	dir := t.TempDir()
	cp := &controlPlane{token: "admin-" + randHex(t), logDir: dir}

	etcdClient, etcdPeer := freePort(t), freePort(t)
	etcdURL := "http://127.0.0.1:" + etcdClient
	peerURL := "http://127.0.0.1:" + etcdPeer
	startProc(t, dir, "etcd", etcdBin, "--name=sage-test", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=sage-test="+peerURL, "--log-level=warn")
	waitHTTP(t, cp, "etcd", &http.Client{Timeout: 5 * time.Second}, etcdURL+"/health", "")

	writeKey(t, filepath.Join(dir, "sa.key"))
	certFile, keyFile := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	cp.caPEM = writeServingCert(t, certFile, keyFile)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(cp.token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cp.host = "https://127.0.0.1:" + port
	startProc(t, dir, "kube-apiserver", apiserverBin,
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+port, "--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile,
		"--token-auth-file="+tokens, "--authorization-mode=RBAC", "--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24", "--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false", "--profiling=false", "--v=0")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitHTTP(t, cp, "kube-apiserver", hc, cp.host+"/readyz", cp.token)
	return cp
}

// config is a rest.Config for token on this control plane.
func (cp *controlPlane) config(token string) *rest.Config {
	return &rest.Config{Host: cp.host, BearerToken: token, UserAgent: "sage-kube-test",
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.caPEM}, QPS: 200, Burst: 400, Timeout: 30 * time.Second}
}

func (cp *controlPlane) clientset(t testing.TB, token string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.config(token))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// startProc runs bin in its own process group, logging to dir/name.log;
// t's cleanup kills the group and waits.
func startProc(t testing.TB, dir, name, bin string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = testenv.ChildAttr(true)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		logf.Close()
	})
}

// waitHTTP polls url until it answers 200, failing t with the logs'
// tails after 3 minutes.
func waitHTTP(t testing.TB, cp *controlPlane, name string, hc *http.Client, url, token string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s after 3 minutes (last: %s)\n%s", name, url, last, cp.logTails())
}

// logTails is the last lines of each process log, for failure messages.
func (cp *controlPlane) logTails() string {
	var b strings.Builder
	for _, n := range []string{"etcd", "kube-apiserver"} {
		data, _ := os.ReadFile(filepath.Join(cp.logDir, n+".log"))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "--- %s.log (tail)\n%s\n", n, strings.Join(lines, "\n"))
	}
	return b.String()
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func randHex(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

// writeKey writes a new P-256 key (the service-account signing key) as
// PEM to path.
func writeKey(t testing.TB, path string) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return key
}

// writeServingCert writes a self-signed certificate for 127.0.0.1 and its
// key, and returns the certificate's PEM (the clients' trust root).
func writeServingCert(t testing.TB, certFile, keyFile string) []byte {
	t.Helper()
	key := writeKey(t, keyFile)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sage-test-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
