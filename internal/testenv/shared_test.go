package testenv

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestSharedPath(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "wt", "clone", "pkg")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	t.Setenv(SharedDirEnv, "")

	// Nothing above: fs.ErrNotExist, which Shared turns into a skip.
	if _, err := SharedPath("spec/x.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no shared folder: err = %v, want fs.ErrNotExist", err)
	}

	// A shared folder two levels above the clone (a worktree) is found.
	want := filepath.Join(root, "shared", "spec", "x.json")
	if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := SharedPath("spec/x.json")
	if err != nil || got != want {
		t.Fatalf("SharedPath = %q, %v; want %q", got, err, want)
	}

	// With SAGE_SHARED_DIR set, a file missing there is an error that is
	// not fs.ErrNotExist: Shared fails instead of skipping.
	t.Setenv(SharedDirEnv, filepath.Join(root, "shared"))
	if _, err := SharedPath("spec/missing.json"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing under %s: err = %v, want a plain error", SharedDirEnv, err)
	}
	if got, err := SharedPath("spec/x.json"); err != nil || got != want {
		t.Fatalf("SharedPath with %s = %q, %v", SharedDirEnv, got, err)
	}
}
