//go:build linux

package local

import (
	"fmt"
	"os"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/seccomp"
)

// RunAsSummary says, in one line, which host uid local commands run as
// for the current user (sage doctor prints it).
func RunAsSummary() (string, error) {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("commands run as you (uid %d); uid 0 inside is you", os.Geteuid()), nil
	}
	first, count, err := uidRange(os.Getenv("SAGE_LOCAL_UID_RANGE"))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("as root, never as root: each workspace's commands run as its own uid from %d..%d (uid 0 inside), registered in %s",
		first, first+count-1, uidRegistry), nil
}

// SeccompSummary says what the seccomp filter on every command refuses.
func SeccompSummary() (string, error) {
	if _, err := seccomp.Program(seccomp.Options{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("on every command: %d system calls fail with EPERM (keyrings, io_uring, bpf, mount and namespace calls, ...), sockets only unix/inet/inet6/netlink, clone without namespace flags; sandbox.local.seccomp.deny adds more",
		len(seccomp.DefaultDeny())), nil
}
