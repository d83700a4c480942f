package sandboxtest

import (
	"os"
	"path/filepath"
	"testing"
)

// TempDir is t.TempDir that other uids may pass through: as root, local
// mode runs each session's commands as that session's own unprivileged
// uid, and bwrap (running as that uid) must reach the workspace, the
// runtime directory and every mount by path. t.TempDir's parent is 0700;
// TempDir opens it, and the directory itself, for search only (0711), so
// nothing in them can be listed.
func TempDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
