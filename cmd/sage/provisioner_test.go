package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func TestProvisionerUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--backend"},
		{[]string{"--backend", "nomad"}, "--backend"},
		{[]string{"--backend", "kubernetes", "--listen", "0.0.0.0:8002", "--api-key", ""}, "not a loopback address"},
		{[]string{"--backend", "docker", "--idle-ttl", "1h"}, "--idle-ttl needs --backend kubernetes"},
		{[]string{"--backend", "docker", "--publish-ip", "nope"}, "--publish-ip \"nope\""},
		{[]string{"--backend", "kubernetes", "--advertise-host", "h"}, "apply to --backend docker"},
	} {
		var errb strings.Builder
		code := run(context.Background(), &cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb}, append([]string{"provisioner"}, tc.args...))
		if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q", tc.args, code, errb.String())
		}
	}
}

// TestProvisionerServesAndStops runs the kubernetes backend against a
// stand-in API server (no cluster runs here) that answers the health
// check's pod list, then stops the service by cancelling its context.
func TestProvisionerServesAndStops(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/sage-test/pods" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`)
	}))
	defer api.Close()
	kubeconfig := filepath.Join(sandboxtest.TempDir(t), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\ncurrent-context: c\n", api.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cliEnv{stdin: strings.NewReader(""), stdout: pw, stderr: io.Discard}, []string{"provisioner",
			"--backend", "kubernetes", "--kubeconfig", kubeconfig, "--namespace", "sage-test", "--listen", "127.0.0.1:0",
			"--api-key", "k", "--idle-ttl", "1h", "--shutdown-grace", "2s"})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no announce line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	base := strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Status, Backend string }
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h.Status != "ok" || h.Backend != "kubernetes" {
		t.Fatalf("health %d %+v", resp.StatusCode, h)
	}
	resp, err = http.Get(base + "/api/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("list without key: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("provisioner did not stop")
	}
}

// Issue 15: the docker provisioner advertises --advertise-host in sandbox
// URLs and publishes where that host can reach (all addresses for a
// non-loopback host, loopback otherwise, or --publish-ip).
func TestProvisionerDockerAdvertise(t *testing.T) {
	for _, tc := range []struct {
		f    provisionerFlags
		want map[string]any
	}{
		{provisionerFlags{}, map[string]any{}},
		{provisionerFlags{advertiseHost: "sandbox.example"}, map[string]any{"host_ip": "0.0.0.0", "advertise_host": "sandbox.example"}},
		{provisionerFlags{advertiseHost: "localhost"}, map[string]any{"advertise_host": "localhost"}},
		{provisionerFlags{advertiseHost: "10.0.0.5", publishIP: "10.0.0.5"}, map[string]any{"host_ip": "10.0.0.5", "advertise_host": "10.0.0.5"}},
	} {
		if got := tc.f.dockerConfig(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: got %v, want %v", tc.f, got, tc.want)
		}
	}
}
