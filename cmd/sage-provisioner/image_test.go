package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sage-go/sage/internal/testenv"
)

// TestImageRuns builds the image deploy/kubernetes/provisioner.yaml runs
// (deploy/kubernetes/Dockerfile around the static binary, as make
// provisioner-image does) and runs it as the manifest does: its
// entrypoint answers --help as the non-root user 65532, with no network.
func TestImageRuns(t *testing.T) {
	docker := testenv.Command(t, "docker", testenv.SetupFix+" (a Docker Engine)")
	bin, err := testenv.Build("./cmd/sage-provisioner", "sage-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := filepath.Abs("../../deploy/kubernetes/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dockerfile); err != nil {
		t.Fatal(err)
	}
	tag := "sage-provisioner-test:" + strings.ToLower(filepath.Base(filepath.Dir(bin)))
	if out, err := exec.Command(docker, "build", "-q", "-f", dockerfile, "-t", tag, filepath.Dir(bin)).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(docker, "rmi", "-f", tag).Run() })
	out, err := exec.Command(docker, "run", "--rm", "--network", "none", tag, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "usage: sage-provisioner") || !strings.Contains(string(out), "-kubeconfig") {
		t.Fatalf("docker run --help: %v\n%s", err, out)
	}
	out, err = exec.Command(docker, "run", "--rm", "--network", "none", "--entrypoint", "", tag, "/sage-provisioner", "--backend", "nomad").CombinedOutput()
	if code := exitCode(err); code != exitUsage || !strings.Contains(string(out), "--backend \"nomad\"") {
		t.Fatalf("a bad flag in the image: exit %d\n%s", code, out)
	}
	id, err := exec.Command(docker, "image", "inspect", "-f", "{{.Config.User}}", tag).Output()
	if err != nil || strings.TrimSpace(string(id)) != "65532:65532" {
		t.Fatalf("image user %q, %v: want 65532:65532 (the manifest's runAsUser)", id, err)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveSageBinary()
	os.Exit(code)
}
