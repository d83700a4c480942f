package memfd

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Seals are the seals of a file from Sealed: its size and content are fixed
// and no seal can be removed or added.
const Seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// Sealed returns a close-on-exec memfd named name holding data, sealed with
// Seals and positioned at its start, for a child to read from a descriptor
// (pass it in exec.Cmd.ExtraFiles and close it once the child started). A
// reader reads from the descriptor's offset, which every process holding it
// shares: use one file per child.
func Sealed(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd %s: create: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := fill(f, data); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd %s: %w", name, err)
	}
	return f, nil
}

func fill(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, Seals); err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		return fmt.Errorf("rewind: %w", err)
	}
	return nil
}
