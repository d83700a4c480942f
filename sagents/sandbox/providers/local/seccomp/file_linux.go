package seccomp

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// File returns a sealed, close-on-exec memfd holding prog, positioned at
// its start, for bwrap --seccomp FD: pass it in exec.Cmd.ExtraFiles (the
// child sees ExtraFiles[i] as fd 3+i) and close it once the command has
// started. bwrap reads the descriptor from its current offset to EOF,
// and the offset is shared by every process holding the descriptor, so
// use one File per bwrap, never one for concurrent commands. The seals
// keep the filter from being changed after it was written.
func File(prog []byte) (*os.File, error) {
	if len(prog) == 0 || len(prog)%8 != 0 {
		return nil, fmt.Errorf("seccomp: program of %d bytes is not a filter (a non-empty multiple of 8); build it with Program", len(prog))
	}
	fd, err := unix.MemfdCreate("sage-seccomp", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("seccomp: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sage-seccomp")
	if _, err := f.Write(prog); err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp: writing the filter: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp: sealing the filter: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp: rewinding the filter: %w", err)
	}
	return f, nil
}
