package seccomp

import (
	"fmt"
	"os"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/memfd"
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
	f, err := memfd.Sealed("sage-seccomp", prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: the filter's file: %w", err)
	}
	return f, nil
}
