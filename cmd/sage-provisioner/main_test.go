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
	"strings"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--backend"},
		{[]string{"--backend", "nomad"}, "--backend \"nomad\""},
		{[]string{"--backend", "kubernetes", "--listen", "0.0.0.0:8002", "--api-key", ""}, "not a loopback address"},
		{[]string{"--backend", "kubernetes", "--advertise-host", "h"}, "apply to --backend docker"},
		{[]string{"--backend", "kubernetes", "--reap-interval", "0s"}, "--reap-interval > 0"},
		{[]string{"--backend", "kubernetes", "extra"}, "unexpected argument \"extra\""},
		{[]string{"--backend", "docker", "--pod-address"}, "apply to --backend kubernetes"},
		{[]string{"--backend", "docker", "--runtime-class", "gvisor"}, "apply to --backend kubernetes"},
		{[]string{"--backend", "kubernetes", "--pod-address", "--service-type", "NodePort", "--node-host", "h"}, "contradict each other"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	} {
		var errb strings.Builder
		code := run(context.Background(), tc.args, io.Discard, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: code %d, stderr %q", tc.args, code, errb.String())
		}
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"--help"}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, flag := range []string{"-backend", "-kubeconfig", "-namespace", "-idle-ttl", "-listen", "-advertise-host", "-pod-address", "-runtime-class"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("help lacks %s:\n%s", flag, out.String())
		}
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	kubeconfig := filepath.Join(sandboxtest.TempDir(t), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\ncurrent-context: c\n", server)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
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
	kubeconfig := writeKubeconfig(t, api.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"--backend", "kubernetes", "--kubeconfig", kubeconfig, "--namespace", "sage-test", "--listen", "127.0.0.1:0",
			"--api-key", "k", "--idle-ttl", "1h", "--shutdown-grace", "2s"}, pw, io.Discard)
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
