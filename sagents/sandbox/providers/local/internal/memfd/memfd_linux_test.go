package memfd_test

import (
	"errors"
	"io"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/memfd"
)

func TestSealed(t *testing.T) {
	f, err := memfd.Sealed("sage-test", []byte("a\x00b\x00"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || string(got) != "a\x00b\x00" {
		t.Fatalf("read %q, %v: want the data from its start", got, err)
	}
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals != memfd.Seals {
		t.Fatalf("seals %#x, %v: want %#x", seals, err, memfd.Seals)
	}
	// The seals hold: no write, no growing or shrinking, no removing them.
	if _, err := f.WriteAt([]byte("X"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("write into a sealed file: %v, want EPERM", err)
	}
	if err := f.Truncate(1); !errors.Is(err, unix.EPERM) {
		t.Errorf("truncate: %v, want EPERM", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); !errors.Is(err, unix.EPERM) {
		t.Errorf("add a seal: %v, want EPERM", err)
	}
	if flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("FD_CLOEXEC not set: %#x, %v", flags, err)
	}
}
