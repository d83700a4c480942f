package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// SharedDirEnv names the folder of the material shared beside the
// repository (../shared: upstream specifications, recordings of real
// providers). .ci/run sets it when that folder is there; a test that
// needs the material then fails if it is incomplete.
const SharedDirEnv = "SAGE_SHARED_DIR"

// SharedPath returns the path of rel (slash-separated) inside the shared
// folder: $SAGE_SHARED_DIR/rel when the variable is set (an error, not
// fs.ErrNotExist, if it is missing there), else the first DIR/shared/rel
// above the working directory (../shared beside a clone, or above a
// worktree). Without one the error wraps fs.ErrNotExist.
func SharedPath(rel string) (string, error) {
	rel = filepath.FromSlash(rel)
	if d := os.Getenv(SharedDirEnv); d != "" {
		p := filepath.Join(d, rel)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s holds no %s: %v", SharedDirEnv, d, rel, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "shared", rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no shared/%s above the working directory (set %s): %w", rel, SharedDirEnv, fs.ErrNotExist)
		}
		dir = parent
	}
}

// Shared returns SharedPath(rel) for a check against the shared material.
// A user's clone has no such folder, so there the check is skipped with
// the reason (the material is never a dependency of the project's own
// tests); with SAGE_SHARED_DIR set (CI, where the folder exists) a
// missing file fails t.
func Shared(t testing.TB, rel string) string {
	t.Helper()
	p, err := SharedPath(rel)
	if err != nil {
		if os.Getenv(SharedDirEnv) == "" && errors.Is(err, fs.ErrNotExist) {
			t.Skipf("check against the shared material skipped: %v", err)
		}
		t.Fatal(err)
	}
	return p
}
