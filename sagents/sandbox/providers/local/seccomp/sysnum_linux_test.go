package seccomp

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// sysnums are golang.org/x/sys/unix's numbers for every name the filter
// handles, for the architecture being compiled; the test holds the
// table the filter uses (elastic/go-seccomp-bpf's) to them.
var sysnums = map[string]uintptr{
	"keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
	"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER, "io_uring_register": unix.SYS_IO_URING_REGISTER,
	"userfaultfd": unix.SYS_USERFAULTFD, "perf_event_open": unix.SYS_PERF_EVENT_OPEN, "bpf": unix.SYS_BPF,
	"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
	"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
	"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
	"move_mount": unix.SYS_MOVE_MOUNT, "open_tree": unix.SYS_OPEN_TREE, "mount_setattr": unix.SYS_MOUNT_SETATTR,
	"setns": unix.SYS_SETNS, "unshare": unix.SYS_UNSHARE,
	"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
	"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
	"reboot": unix.SYS_REBOOT, "swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "acct": unix.SYS_ACCT,
	"syslog": unix.SYS_SYSLOG, "lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE,
	"quotactl": unix.SYS_QUOTACTL, "quotactl_fd": unix.SYS_QUOTACTL_FD, "vhangup": unix.SYS_VHANGUP,
	"settimeofday": unix.SYS_SETTIMEOFDAY, "clock_settime": unix.SYS_CLOCK_SETTIME,
	"clock_adjtime": unix.SYS_CLOCK_ADJTIME, "adjtimex": unix.SYS_ADJTIMEX, "nfsservctl": unix.SYS_NFSSERVCTL,
	"socket": unix.SYS_SOCKET, "socketpair": unix.SYS_SOCKETPAIR, "personality": unix.SYS_PERSONALITY,
	"clone": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3,
	"execve": unix.SYS_EXECVE, "exit": unix.SYS_EXIT, "exit_group": unix.SYS_EXIT_GROUP,
	"rt_sigreturn": unix.SYS_RT_SIGRETURN, "restart_syscall": unix.SYS_RESTART_SYSCALL, "getpid": unix.SYS_GETPID,
}

func TestSyscallTableMatchesXSys(t *testing.T) {
	tgt, ok := targets[runtime.GOARCH]
	if !ok {
		t.Skipf("no filter for %s", runtime.GOARCH) // Program's error is tested elsewhere
	}
	for name, want := range archSysnums {
		sysnums[name] = want
	}
	for _, r := range denyRules {
		_, has := tgt.info.SyscallNames[r.name]
		_, checked := sysnums[r.name]
		require.Equal(t, has, checked, "%s: the table and x/sys disagree on whether it exists on %s", r.name, runtime.GOARCH)
	}
	for name, want := range sysnums {
		got, ok := tgt.info.SyscallNames[name]
		require.True(t, ok, "%s missing from the table", name)
		require.Equal(t, int(want), got, "%s on %s", name, runtime.GOARCH)
	}
}
