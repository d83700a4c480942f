//go:build linux

package layers

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMirror: the destination ends up holding exactly the source (new,
// changed, removed entries, modes, symlinks); a symlink in the source that
// points out of it is copied as a link, never followed, and one planted in
// the destination is replaced, not written through.
func TestMirror(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(src, "keep"), "same", 0o644)
	write(t, filepath.Join(dst, "keep"), "same", 0o644)
	mt := time.Unix(1700000000, 0)
	os.Chtimes(filepath.Join(src, "keep"), mt, mt)
	os.Chtimes(filepath.Join(dst, "keep"), mt, mt)
	write(t, filepath.Join(src, "changed"), "new", 0o750)
	write(t, filepath.Join(dst, "changed"), "old", 0o644)
	write(t, filepath.Join(dst, "gone/deep/x"), "x", 0o644)
	write(t, filepath.Join(src, "dir/f"), "f", 0o600)
	os.Symlink(outside, filepath.Join(src, "out"))
	os.Symlink(outside, filepath.Join(dst, "dir2"))                        // planted: a directory of src lands here
	write(t, filepath.Join(src, "dir2/secret"), "must stay inside", 0o644) // src's dir2 is a real directory
	if err := Mirror(dst, src, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dst, "changed")); got != "new" {
		t.Fatalf("changed: %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "changed")); fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if _, err := os.Lstat(filepath.Join(dst, "gone")); !os.IsNotExist(err) {
		t.Fatalf("gone: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "out")); err != nil || l != outside {
		t.Fatalf("out: %q %v", l, err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "dir2")); err != nil || !fi.IsDir() {
		t.Fatalf("dir2 should be a directory now: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("wrote through a planted symlink: %v", ents)
	}
}
