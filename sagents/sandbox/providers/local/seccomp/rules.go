package seccomp

import (
	"github.com/elastic/go-seccomp-bpf/arch"
)

// rule is one unconditional deny and the reason for it.
type rule struct {
	name string
	why  string
}

// denyRules fail with EPERM whatever their arguments. doc.go explains the
// list as a whole; each reason here is the one line a reader needs.
var denyRules = []rule{
	// Kernel keyrings are not namespaced: a sandboxed process would share
	// the keyrings (and key quota) of its uid on the host.
	{"keyctl", "kernel keyrings are shared with the host uid"},
	{"add_key", "kernel keyrings are shared with the host uid"},
	{"request_key", "kernel keyrings are shared with the host uid"},
	// io_uring: a large, often-exploited surface whose operations bypass
	// this filter (they are not system calls). Docker blocks it too.
	{"io_uring_setup", "io_uring bypasses syscall filtering and is a frequent exploit target"},
	{"io_uring_enter", "io_uring bypasses syscall filtering and is a frequent exploit target"},
	{"io_uring_register", "io_uring bypasses syscall filtering and is a frequent exploit target"},
	{"userfaultfd", "used to widen race windows in kernel exploits"},
	{"perf_event_open", "kernel address and side-channel leaks, frequent exploit target"},
	{"bpf", "loads programs into the kernel"},
	{"kexec_load", "replaces the running kernel"},
	{"kexec_file_load", "replaces the running kernel"},
	// The mount tree is bwrap's: nothing inside may change it.
	{"mount", "changes the mount tree bwrap set up"},
	{"umount2", "changes the mount tree bwrap set up"},
	{"pivot_root", "changes the mount tree bwrap set up"},
	{"fsopen", "new mount API: changes the mount tree"},
	{"fsconfig", "new mount API: changes the mount tree"},
	{"fsmount", "new mount API: changes the mount tree"},
	{"fspick", "new mount API: changes the mount tree"},
	{"move_mount", "new mount API: changes the mount tree"},
	{"open_tree", "new mount API: clones mounts"},
	{"mount_setattr", "new mount API: changes mount flags"},
	{"setns", "joins other namespaces"},
	{"unshare", "creates namespaces (new user namespaces are also disabled by bwrap)"},
	// "Shocker" (2014): a file handle opens any file of the file system,
	// whatever is bind-mounted where.
	{"open_by_handle_at", "opens files by handle, bypassing the mount layout"},
	{"name_to_handle_at", "makes the handles open_by_handle_at takes"},
	{"init_module", "loads kernel modules"},
	{"finit_module", "loads kernel modules"},
	{"delete_module", "unloads kernel modules"},
	{"reboot", "reboots the host or changes Ctrl-Alt-Del handling"},
	{"swapon", "changes host swap"},
	{"swapoff", "changes host swap"},
	{"acct", "switches process accounting to a file"},
	{"syslog", "reads the kernel log (kernel addresses)"},
	{"iopl", "raw I/O port access (x86)"},
	{"ioperm", "raw I/O port access (x86)"},
	{"lookup_dcookie", "kernel profiling interface (removed in Linux 6.8)"},
	{"quotactl", "changes disk quotas"},
	{"quotactl_fd", "changes disk quotas"},
	{"vhangup", "hangs up the current terminal"},
	// The clock is not namespaced (CLOCK_REALTIME is the host's).
	{"settimeofday", "sets the host clock"},
	{"clock_settime", "sets the host clock"},
	{"clock_adjtime", "adjusts the host clock"},
	{"adjtimex", "adjusts the host clock"},
	// Obsolete calls Docker's profile leaves out as well.
	{"uselib", "obsolete a.out loader"},
	{"ustat", "obsolete"},
	{"sysfs", "obsolete"},
	{"_sysctl", "obsolete (removed in Linux 5.5)"},
	{"nfsservctl", "obsolete (removed in Linux 3.1)"},
}

// essential names cannot be denied: every command, and bwrap starting it,
// needs them, and denying them hangs or crashes processes instead of
// failing them with a message.
var essential = map[string]string{
	"execve":          "bwrap starts the command with it",
	"exit":            "threads could not end",
	"exit_group":      "processes could not end",
	"rt_sigreturn":    "every signal handler returns through it",
	"restart_syscall": "interrupted sleeps resume through it",
}

// Address families socket() and socketpair() may use. Every other one
// (AF_VSOCK, which is not network-namespaced and reaches the hypervisor;
// AF_PACKET; AF_BLUETOOTH; AF_ALG; ...) is refused.
var allowedFamilies = []uint32{
	1,  // AF_UNIX
	2,  // AF_INET
	10, // AF_INET6
	16, // AF_NETLINK (glibc's getaddrinfo and getifaddrs, ip(8))
}

// allowedPersonalities are the personality(2) values Docker allows: query
// (0xffffffff), PER_LINUX, PER_LINUX32, UNAME26 and UNAME26|PER_LINUX32.
// The rest turn on ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO
// and other exploit aids.
var allowedPersonalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// cloneNamespaceFlags is CLONE_NEWNS|CLONE_NEWCGROUP|CLONE_NEWUTS|
// CLONE_NEWIPC|CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET, as in Docker.
// (CLONE_NEWTIME, 0x80, overlaps the exit signal byte of clone() and only
// works through clone3 and unshare, both refused.)
const cloneNamespaceFlags = 0x7e020000

// conditional names have argument checks; listing one in ExtraDeny
// replaces its check by an unconditional deny.
var conditional = map[string]bool{"socket": true, "socketpair": true, "personality": true, "clone": true}

// target is a supported architecture.
type target struct {
	info *arch.Info
	// x32 is true on amd64, whose x32 ABI shares the audit arch and sets
	// __X32_SYSCALL_BIT in the number instead.
	x32 bool
	// cloneFlags is the index of clone()'s flags argument (0 on x86_64 and
	// arm64; s390 would have 1).
	cloneFlags int
}

var targets = map[string]target{
	"amd64": {info: arch.X86_64, x32: true, cloneFlags: 0},
	"arm64": {info: arch.AARCH64, cloneFlags: 0},
}
