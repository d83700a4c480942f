//go:build linux

package local

import (
	"fmt"
	"os"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/seccomp"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// RunAsSummary says, in one line, which host uid local commands run as
// for the current user (sage doctor prints it).
func RunAsSummary() (string, error) {
	if os.Geteuid() != 0 {
		return fmt.Sprintf("commands run as you (uid %d); uid 0 inside is you", os.Geteuid()), nil
	}
	first, count, err := uids.Range(os.Getenv("SAGE_LOCAL_UID_RANGE"))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("as root, never as root: each workspace's commands run as its own uid from %d..%d (uid 0 inside), registered in %s",
		first, first+count-1, uids.Registry), nil
}

// SeccompSummary says what the seccomp filter on every command refuses.
func SeccompSummary() (string, error) {
	if _, err := seccomp.Program(seccomp.Options{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("on every command: %d system calls fail with EPERM (keyrings, io_uring, bpf, mount and namespace calls, ...), sockets only unix/inet/inet6/netlink, clone without namespace flags; sandbox.local.seccomp.deny adds more",
		len(seccomp.DefaultDeny())), nil
}

// SessionIsolationSummary says what keeps a session sandbox's commands
// from each other and from the supervisor on this kernel (sage doctor
// prints it): holds is false where the kernel has no Landlock signal
// scopes, and detail says what still holds there.
func SessionIsolationSummary() (holds bool, detail string) {
	abi := supervisor.LandlockABI()
	if abi >= supervisor.LandlockSignalABI {
		return true, fmt.Sprintf("Landlock ABI %d: each session command runs in a Landlock domain of its own, so it cannot stop, trace or read the supervisor, another command or a background task, nor signal the supervisor or pid 1, and a timeout or cancel ends every process it started (setsid or not); gdb and strace work on its own processes, and kill, pkill and kill -1 on every process of the session (a background task's, another command's) but the supervisor's and pid 1's, through the supervisor (a seccomp user-notification relay); the supervisor is the sandbox's pid 1, and the host stops a session whose supervisor does not end a command in time", abi)
	}
	return false, fmt.Sprintf("Landlock ABI %d (signal scopes need %d, Linux 6.12+): no per-command domains; the supervisor is still out of reach (the sandbox's pid 1, not dumpable) and the host still enforces every timeout, but a timeout or cancel ends the command's process group only (a setsid child outlives it, except with a CPU limit as root: its cgroup), and commands may signal and trace each other",
		abi, supervisor.LandlockSignalABI)
}
