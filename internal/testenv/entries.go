//go:build linux

package testenv

import (
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// MakeEntries creates n empty files named f1000000, f1000001, ... in dir
// with mknodat(2), the cheapest way to make a directory entry (for tests
// of bounded listings over huge directories).
func MakeEntries(t testing.TB, dir string, n int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 16)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], 'f'), int64(1000000+i), 10)
		if err := unix.Mknodat(fd, string(buf), unix.S_IFREG|0o644, 0); err != nil {
			t.Fatalf("mknodat %s/%s: %v", dir, buf, err)
		}
	}
}
