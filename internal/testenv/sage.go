package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// binaries are this module's programs built by the test binary, all in
// one temporary directory that RemoveSageBinary removes.
var (
	binMu   sync.Mutex
	binDir  string
	binDone = map[string]built{} // key: package and flags
)

type built struct {
	path string
	err  error
}

// SageBinary builds this module's ./cmd/sage once per test binary and
// returns its path. The binary is static (CGO_ENABLED=0, -trimpath), so
// it also runs inside a sandbox container. A TestMain that calls it
// removes it with RemoveSageBinary after m.Run.
func SageBinary() (string, error) { return Build("./cmd/sage", "sage") }

// SupervisorBinary builds ./cmd/sage-supervisor (local mode's session
// supervisor on its own) once per test binary, as SageBinary builds sage.
func SupervisorBinary() (string, error) { return Build("./cmd/sage-supervisor", "sage-supervisor") }

// Build builds the module's package pkg (a ./cmd/... path) with go build
// and the extra flags once per test binary (per package and flags) as a
// static binary named name in its own directory, and returns its path.
func Build(pkg, name string, flags ...string) (string, error) {
	binMu.Lock()
	defer binMu.Unlock()
	key := pkg + "\x00" + strings.Join(flags, "\x00")
	if b, ok := binDone[key]; ok {
		return b.path, b.err
	}
	path, err := build(pkg, name, flags)
	binDone[key] = built{path, err}
	return path, err
}

func build(pkg, name string, flags []string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "sage-test-bin-"); err != nil {
			return "", err
		}
	}
	dir, err := os.MkdirTemp(binDir, "b")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	args := append(append([]string{"build", "-trimpath"}, flags...), "-o", bin, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// RemoveSageBinary removes what SageBinary, SupervisorBinary and Build
// built, if anything.
func RemoveSageBinary() {
	binMu.Lock()
	defer binMu.Unlock()
	if binDir != "" {
		os.RemoveAll(binDir)
		binDir = ""
		binDone = map[string]built{}
	}
}
