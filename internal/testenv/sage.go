package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var (
	sageOnce sync.Once
	sageBin  string
	sageDir  string
	sageErr  error
)

// SageBinary builds this module's ./cmd/sage once per test binary and
// returns its path. The binary is static (CGO_ENABLED=0, -trimpath), so
// it also runs inside a sandbox container. A TestMain that calls it
// removes it with RemoveSageBinary after m.Run.
func SageBinary() (string, error) {
	sageOnce.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			sageErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		if sageDir, sageErr = os.MkdirTemp("", "sage-test-bin-"); sageErr != nil {
			return
		}
		bin := filepath.Join(sageDir, "sage")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/sage")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			sageErr = fmt.Errorf("go build ./cmd/sage: %v\n%s", err, out)
			return
		}
		sageBin = bin
	})
	return sageBin, sageErr
}

// RemoveSageBinary removes what SageBinary built, if anything.
func RemoveSageBinary() {
	if sageDir != "" {
		os.RemoveAll(sageDir)
	}
}
