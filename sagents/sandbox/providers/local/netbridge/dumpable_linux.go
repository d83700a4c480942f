package netbridge

import (
	"fmt"
	"syscall"
)

const prSetDumpable = 4 // PR_SET_DUMPABLE

// notDumpable makes this process not dumpable: processes of the same uid
// can neither ptrace it nor open its descriptors through /proc.
func notDumpable() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", e)
	}
	return nil
}
