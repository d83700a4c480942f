package seccomp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/seccomp/internal/int80"
	"golang.org/x/sys/unix"
)

// The probe: the test binary, started inside bwrap with probeEnv set to a
// comma-separated list of probe names, makes each call and prints
// "name errno" per line (errno 0: the call succeeded). Arguments are
// chosen so that no call can change anything even where it is allowed:
// bad fds, missing paths, NULL pointers, wrong magic numbers.

const (
	probeEnv   = "SAGE_SECCOMP_PROBE"
	hostPidEnv = "SAGE_SECCOMP_HOST_PID"
)

type probe struct {
	name string
	call func() syscall.Errno
	// want is the filter's answer for a denied call (EPERM, ENOSYS for
	// clone3); for an allowed call, ok lists the acceptable answers.
	want syscall.Errno
	ok   []syscall.Errno
	// distinct: without the filter the kernel answers something else
	// than want here (as root and as an ordinary user, with all
	// capabilities dropped), so the control run must not see want.
	distinct bool
	goarch   string // "" for every architecture
}

func (p probe) denied() bool { return p.want != 0 }

// keep holds the C strings handed to the kernel until the probe exits.
var keep [][]byte

func cstr(s string) uintptr {
	b := append([]byte(s), 0)
	keep = append(keep, b)
	return uintptr(unsafe.Pointer(&b[0]))
}

func buf(n int) uintptr {
	b := make([]byte, n)
	keep = append(keep, b)
	return uintptr(unsafe.Pointer(&b[0]))
}

const (
	minus1  = ^uintptr(0)  // -1: a bad fd
	atFdcwd = ^uintptr(99) // AT_FDCWD (-100)
)

// sys makes a raw call and closes what it returns on success when fd is
// true (sockets, userfaultfd, io_uring).
func sys(fd bool, nr uintptr, a ...uintptr) syscall.Errno {
	var x [6]uintptr
	copy(x[:], a)
	r, _, e := syscall.Syscall6(nr, x[0], x[1], x[2], x[3], x[4], x[5])
	if e == 0 && fd {
		syscall.Close(int(r))
	}
	return e
}

func call(nr uintptr, a ...uintptr) func() syscall.Errno {
	return func() syscall.Errno { return sys(false, nr, a...) }
}

func callFD(nr uintptr, a ...uintptr) func() syscall.Errno {
	return func() syscall.Errno { return sys(true, nr, a...) }
}

// personalityTo sets a persona and, where that worked, sets the previous
// one back, so later probes run under the usual one.
func personalityTo(p uintptr) func() syscall.Errno {
	return func() syscall.Errno {
		old, _, e := syscall.Syscall(unix.SYS_PERSONALITY, p, 0, 0)
		if e == 0 {
			syscall.Syscall(unix.SYS_PERSONALITY, old, 0, 0)
		}
		return e
	}
}

// cloneWith forks with extra clone flags; a child (only possible where
// the flags are allowed) exits at once.
func cloneWith(flags uintptr) func() syscall.Errno {
	return func() syscall.Errno {
		pid, _, e := syscall.RawSyscall6(unix.SYS_CLONE, flags|uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if e != 0 {
			return e
		}
		if pid == 0 {
			syscall.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		var ws syscall.WaitStatus
		syscall.Wait4(int(pid), &ws, 0, nil)
		return 0
	}
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// ptraceChild starts /bin/true traced, reads its registers and lets it go.
func ptraceChild() syscall.Errno {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		return errnoOf(err)
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		return errnoOf(err)
	}
	var regs syscall.PtraceRegs
	err := syscall.PtraceGetRegs(pid, &regs)
	syscall.PtraceDetach(pid)
	cmd.Wait()
	return errnoOf(err)
}

// ptraceHost attaches to the pid the test process has on the host: the
// pid namespace must hide it.
func ptraceHost() syscall.Errno {
	pid, err := strconv.Atoi(os.Getenv(hostPidEnv))
	if err != nil || pid <= 1 {
		return syscall.EINVAL
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err = syscall.PtraceAttach(pid)
	if err == nil {
		syscall.PtraceDetach(pid)
	}
	return errnoOf(err)
}

func forkExecTrue() syscall.Errno { return errnoOf(exec.Command("/bin/true").Run()) }

func i386Getpid() syscall.Errno {
	if r := int80.Getpid(); r < 0 {
		return syscall.Errno(-r)
	}
	return 0
}

const (
	afUnix, afInet, afInet6, afNetlink            = 1, 2, 10, 16
	afPacket, afBluetooth, afALG, afVsock         = 17, 31, 38, 40
	sockStream, sockDgram, sockRaw, sockSeqpacket = 1, 2, 3, 5
	uffdUserModeOnly                              = 1
)

var (
	EPERM  = syscall.EPERM
	ENOSYS = syscall.ENOSYS
)

// probes lists every denied call with harmless arguments, then the
// allowed ones.
var probes = []probe{
	{name: "keyctl", call: call(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(2) /* KEY_SPEC_SESSION_KEYRING */, 0), want: EPERM, distinct: true},
	{name: "add_key", call: call(unix.SYS_ADD_KEY, cstr("user"), cstr("sage-probe"), cstr("x"), 1, ^uintptr(1) /* KEY_SPEC_PROCESS_KEYRING */), want: EPERM, distinct: true},
	{name: "request_key", call: call(unix.SYS_REQUEST_KEY, cstr("user"), cstr("sage-probe-missing"), 0, 0), want: EPERM, distinct: true},
	{name: "io_uring_setup", call: callFD(unix.SYS_IO_URING_SETUP, 0, buf(256)), want: EPERM, distinct: true},
	{name: "io_uring_enter", call: call(unix.SYS_IO_URING_ENTER, minus1, 0, 0, 0, 0, 0), want: EPERM, distinct: true},
	{name: "io_uring_register", call: call(unix.SYS_IO_URING_REGISTER, minus1, 0, 0, 0), want: EPERM, distinct: true},
	{name: "userfaultfd", call: callFD(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly), want: EPERM, distinct: true},
	{name: "perf_event_open", call: callFD(unix.SYS_PERF_EVENT_OPEN, 0, 0, minus1, minus1, 0), want: EPERM, distinct: true},
	{name: "bpf", call: call(unix.SYS_BPF, 0xffff, 0, 0), want: EPERM},
	{name: "kexec_load", call: call(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0), want: EPERM},
	{name: "kexec_file_load", call: call(unix.SYS_KEXEC_FILE_LOAD, minus1, minus1, 0, 0, 0), want: EPERM},
	{name: "mount", call: call(unix.SYS_MOUNT, 0, 0, 0, 0, 0), want: EPERM},
	{name: "umount2", call: call(unix.SYS_UMOUNT2, cstr("/sage-probe-missing"), 0), want: EPERM},
	{name: "pivot_root", call: call(unix.SYS_PIVOT_ROOT, cstr("/sage-probe-missing"), cstr("/sage-probe-missing")), want: EPERM},
	{name: "fsopen", call: callFD(unix.SYS_FSOPEN, cstr("sage-probe-missing"), 0), want: EPERM},
	{name: "fsconfig", call: call(unix.SYS_FSCONFIG, minus1, 0, 0, 0, 0), want: EPERM, distinct: true},
	{name: "fsmount", call: callFD(unix.SYS_FSMOUNT, minus1, 0, 0), want: EPERM},
	{name: "fspick", call: callFD(unix.SYS_FSPICK, minus1, cstr(""), 0), want: EPERM},
	{name: "move_mount", call: call(unix.SYS_MOVE_MOUNT, minus1, cstr(""), minus1, cstr(""), 0), want: EPERM},
	{name: "open_tree", call: callFD(unix.SYS_OPEN_TREE, minus1, cstr(""), 0), want: EPERM, distinct: true},
	{name: "mount_setattr", call: call(unix.SYS_MOUNT_SETATTR, minus1, cstr(""), 0, 0, 0), want: EPERM, distinct: true},
	{name: "setns", call: call(unix.SYS_SETNS, minus1, 0), want: EPERM, distinct: true},
	{name: "unshare", call: call(unix.SYS_UNSHARE, 0), want: EPERM, distinct: true},
	{name: "open_by_handle_at", call: callFD(unix.SYS_OPEN_BY_HANDLE_AT, minus1, 0, 0), want: EPERM},
	{name: "name_to_handle_at", call: call(unix.SYS_NAME_TO_HANDLE_AT, atFdcwd, cstr("/"), 0, buf(8), 0), want: EPERM, distinct: true},
	{name: "init_module", call: call(unix.SYS_INIT_MODULE, 0, 0, cstr("")), want: EPERM},
	{name: "finit_module", call: call(unix.SYS_FINIT_MODULE, minus1, cstr(""), 0), want: EPERM},
	{name: "delete_module", call: call(unix.SYS_DELETE_MODULE, cstr("sage_probe_missing"), 0), want: EPERM},
	{name: "reboot", call: call(unix.SYS_REBOOT, 0, 0, 0, 0), want: EPERM},
	{name: "swapon", call: call(unix.SYS_SWAPON, cstr("/sage-probe-missing"), 0), want: EPERM},
	{name: "swapoff", call: call(unix.SYS_SWAPOFF, cstr("/sage-probe-missing")), want: EPERM},
	{name: "acct", call: call(unix.SYS_ACCT, cstr("/sage-probe-missing")), want: EPERM},
	{name: "syslog", call: call(unix.SYS_SYSLOG, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, 0, 0), want: EPERM},
	{name: "lookup_dcookie", call: call(unix.SYS_LOOKUP_DCOOKIE, 0, 0, 0), want: EPERM},
	{name: "quotactl", call: call(unix.SYS_QUOTACTL, 0, 0, 0, 0), want: EPERM},
	{name: "quotactl_fd", call: call(unix.SYS_QUOTACTL_FD, minus1, 0, 0, 0), want: EPERM, distinct: true},
	{name: "vhangup", call: call(unix.SYS_VHANGUP), want: EPERM},
	{name: "settimeofday", call: call(unix.SYS_SETTIMEOFDAY, 0, 0), want: EPERM},
	{name: "clock_settime", call: call(unix.SYS_CLOCK_SETTIME, 0, 0), want: EPERM, distinct: true},
	{name: "clock_adjtime", call: call(unix.SYS_CLOCK_ADJTIME, 0, 0), want: EPERM, distinct: true},
	{name: "adjtimex", call: call(unix.SYS_ADJTIMEX, 0), want: EPERM, distinct: true},
	{name: "nfsservctl", call: call(unix.SYS_NFSSERVCTL, 0, 0, 0), want: EPERM, distinct: true},
	{name: "socket(AF_VSOCK)", call: callFD(unix.SYS_SOCKET, afVsock, sockStream|unix.SOCK_CLOEXEC, 0), want: EPERM, distinct: true},
	{name: "socket(AF_PACKET)", call: callFD(unix.SYS_SOCKET, afPacket, sockRaw|unix.SOCK_CLOEXEC, 0), want: EPERM},
	{name: "socket(AF_BLUETOOTH)", call: callFD(unix.SYS_SOCKET, afBluetooth, sockStream|unix.SOCK_CLOEXEC, 0), want: EPERM, distinct: true},
	{name: "socket(AF_ALG)", call: callFD(unix.SYS_SOCKET, afALG, sockSeqpacket|unix.SOCK_CLOEXEC, 0), want: EPERM, distinct: true},
	// The kernel reads an int and sees AF_UNIX; the filter sees junk.
	{name: "socket(1<<32|AF_UNIX)", call: callFD(unix.SYS_SOCKET, 1<<32|afUnix, sockStream|unix.SOCK_CLOEXEC, 0), want: EPERM, distinct: true},
	{name: "socketpair(AF_VSOCK)", call: call(unix.SYS_SOCKETPAIR, afVsock, sockStream, 0, buf(8)), want: EPERM, distinct: true},
	{name: "personality(ADDR_NO_RANDOMIZE)", call: personalityTo(0x0040000), want: EPERM, distinct: true},
	{name: "personality(READ_IMPLIES_EXEC)", call: personalityTo(0x0400000), want: EPERM, distinct: true},
	// --disable-userns makes the kernel answer ENOSPC here.
	{name: "clone(CLONE_NEWUSER)", call: cloneWith(unix.CLONE_NEWUSER), want: EPERM, distinct: true},
	{name: "clone(CLONE_NEWNS)", call: cloneWith(unix.CLONE_NEWNS), want: EPERM},
	{name: "clone(CLONE_NEWNET)", call: cloneWith(unix.CLONE_NEWNET), want: EPERM},
	{name: "clone(CLONE_NEWPID)", call: cloneWith(unix.CLONE_NEWPID), want: EPERM},
	{name: "clone(CLONE_NEWUTS)", call: cloneWith(unix.CLONE_NEWUTS), want: EPERM},
	{name: "clone(CLONE_NEWIPC)", call: cloneWith(unix.CLONE_NEWIPC), want: EPERM},
	{name: "clone(CLONE_NEWCGROUP)", call: cloneWith(unix.CLONE_NEWCGROUP), want: EPERM},
	{name: "clone3", call: call(unix.SYS_CLONE3, 0, 0), want: ENOSYS, distinct: true},
	// x86_64 only.
	{name: "iopl", call: call(sysIOPL, 0), want: EPERM, distinct: true, goarch: "amd64"},
	{name: "ioperm", call: call(sysIOPERM, 0, 0, 0), want: EPERM, distinct: true, goarch: "amd64"},
	{name: "uselib", call: call(sysUSELIB, 0), want: EPERM, distinct: true, goarch: "amd64"},
	{name: "ustat", call: call(sysUSTAT, 0, 0), want: EPERM, distinct: true, goarch: "amd64"},
	{name: "sysfs", call: call(sysSYSFS, 3, 0, 0), want: EPERM, distinct: true, goarch: "amd64"},
	{name: "_sysctl", call: call(sysSYSCTL, 0), want: EPERM, distinct: true, goarch: "amd64"},
	// Other ABIs: getpid through the i386 entry point and the x32 one.
	{name: "int80 getpid", call: i386Getpid, want: EPERM, distinct: true, goarch: "amd64"},
	{name: "x32 getpid", call: call(0x40000000|39, 0), want: EPERM, distinct: true, goarch: "amd64"},

	// Allowed.
	{name: "socket(AF_UNIX)", call: callFD(unix.SYS_SOCKET, afUnix, sockStream|unix.SOCK_CLOEXEC, 0)},
	{name: "socket(AF_INET)", call: callFD(unix.SYS_SOCKET, afInet, sockStream|unix.SOCK_CLOEXEC, 0)},
	{name: "socket(AF_INET6)", call: callFD(unix.SYS_SOCKET, afInet6, sockDgram|unix.SOCK_CLOEXEC, 0), ok: []syscall.Errno{0, syscall.EAFNOSUPPORT}},
	{name: "socket(AF_NETLINK)", call: callFD(unix.SYS_SOCKET, afNetlink, sockRaw|unix.SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */)},
	{name: "socketpair(AF_UNIX)", call: func() syscall.Errno {
		fds, err := syscall.Socketpair(afUnix, sockStream, 0)
		if err == nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
		}
		return errnoOf(err)
	}},
	{name: "personality(query)", call: call(unix.SYS_PERSONALITY, 0xffffffff)},
	{name: "personality(PER_LINUX32)", call: personalityTo(0x8)},
	{name: "fork+exec /bin/true", call: forkExecTrue},
	{name: "ptrace child", call: ptraceChild},
	{name: "ptrace host pid", call: ptraceHost, ok: []syscall.Errno{syscall.ESRCH}},
}

func probesFor(denied bool) []probe {
	var out []probe
	for _, p := range probes {
		if p.denied() == denied && (p.goarch == "" || p.goarch == runtime.GOARCH) {
			out = append(out, p)
		}
	}
	return out
}

// runProbes is the probe process: it makes the calls named in probeEnv.
func runProbes(names string) {
	byName := map[string]probe{}
	for _, p := range probes {
		byName[p.name] = p
	}
	for _, name := range strings.Split(names, ",") {
		p, ok := byName[name]
		if !ok {
			fmt.Printf("%s -1\n", name)
			continue
		}
		fmt.Printf("%s %d\n", name, int(p.call()))
	}
}
