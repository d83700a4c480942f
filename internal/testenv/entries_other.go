//go:build !linux

package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// MakeEntries creates n empty files named f1000000, f1000001, ... in dir
// (for tests of bounded listings over huge directories; mknodat(2) on
// Linux, open(2) elsewhere).
func MakeEntries(t testing.TB, dir string, n int) {
	t.Helper()
	for i := range n {
		name := filepath.Join(dir, "f"+strconv.Itoa(1000000+i))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		f.Close()
	}
}
