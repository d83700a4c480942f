package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// ConfigKey is the configuration key that holds Options.ExtraDeny; errors
// about bad names point at it.
const ConfigKey = "sandbox.local.seccomp.deny"

var (
	// ErrUnknownSyscall is wrapped by the error for a name that is not a
	// Linux system call on any supported architecture.
	ErrUnknownSyscall = errors.New("unknown syscall")
	// ErrUnsupported is wrapped by the error for a GOOS or GOARCH the
	// filter cannot be built for.
	ErrUnsupported = errors.New("seccomp filter unsupported")
)

// Options tunes the filter.
type Options struct {
	// ExtraDeny names more system calls (as in syscalls(2), e.g. "ptrace")
	// that fail with EPERM, on top of DefaultDeny. A name that exists on
	// another supported architecture but not on the running one is
	// skipped there (the call does not exist, so nothing can make it).
	// Listing socket, socketpair, personality or clone denies it whatever
	// its arguments; clone3 is always refused (ENOSYS) and listing it
	// changes nothing. Duplicates are fine. See Validate for the names
	// that are refused.
	ExtraDeny []string
}

// Limits on outside input (the configured names).
const (
	maxNames   = 512 // more than there are system calls
	maxNameLen = 64  // the longest Linux syscall name has 23 bytes
)

// Values of struct seccomp_data's fields and of filter return values
// (linux/seccomp.h, linux/audit.h), spelled out so the package builds on
// every GOOS.
const (
	retAllow = 0x7fff0000 // SECCOMP_RET_ALLOW
	retErrno = 0x00050000 // SECCOMP_RET_ERRNO | errno

	errnoEPERM  = 1
	errnoENOSYS = 38

	offNr   = 0  // int nr
	offArch = 4  // __u32 arch
	offArgs = 16 // __u64 args[6]

	x32SyscallBit = 0x40000000 // __X32_SYSCALL_BIT

	maxInstructions = 4096 // BPF_MAXINSNS
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

// DefaultDeny returns the system calls the filter fails with EPERM
// whatever their arguments, sorted. Names that do not exist on the running
// architecture (iopl and ioperm outside x86) are listed but not in the
// filter. The argument checks (socket, socketpair, personality, clone) and
// clone3 (ENOSYS) are described in the package documentation.
func DefaultDeny() []string {
	names := make([]string, 0, len(denyRules))
	for _, r := range denyRules {
		names = append(names, r.name)
	}
	slices.Sort(names)
	return names
}

// Validate checks names meant for Options.ExtraDeny: each must be a Linux
// system call on a supported architecture and must not be one every
// command needs. The error names the first bad entry and the fix.
func Validate(names []string) error {
	if len(names) > maxNames {
		return fmt.Errorf("seccomp: %d names in %s, at most %d allowed; list each system call once", len(names), ConfigKey, maxNames)
	}
	for _, n := range names {
		if err := validateName(n); err != nil {
			return err
		}
	}
	return nil
}

func validateName(n string) error {
	if n == "" {
		return fmt.Errorf("seccomp: empty syscall name in %s; names are as in syscalls(2), e.g. \"ptrace\"", ConfigKey)
	}
	known := len(n) <= maxNameLen
	if known {
		_, onAMD64 := arch.X86_64.SyscallNames[n]
		_, onARM64 := arch.AARCH64.SyscallNames[n]
		known = onAMD64 || onARM64
	}
	if !known {
		shown := n
		if len(shown) > maxNameLen {
			shown = shown[:maxNameLen] + "..."
		}
		return fmt.Errorf("seccomp: %w %q in %s; names are as in syscalls(2), e.g. \"ptrace\"", ErrUnknownSyscall, shown, ConfigKey)
	}
	if why, ok := essential[n]; ok {
		return fmt.Errorf("seccomp: syscall %q in %s cannot be denied (%s); remove it from the list", n, ConfigKey, why)
	}
	return nil
}

// Program returns the filter for the running architecture, ready for
// bwrap --seccomp FD: an array of struct sock_filter (8 bytes each, in
// the machine's byte order). Every syscall not denied is allowed. Its
// error names the bad input: an unknown or essential name in
// opts.ExtraDeny, or an unsupported GOOS/GOARCH.
func Program(opts Options) ([]byte, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("seccomp: %w on %s: the filter is for bwrap on Linux", ErrUnsupported, runtime.GOOS)
	}
	ins, err := build(runtime.GOARCH, opts.ExtraDeny, errnoEPERM, errnoENOSYS)
	if err != nil {
		return nil, err
	}
	return encode(ins)
}

// build assembles the filter for goarch. denyErrno is what denied calls
// (and foreign ABIs) get, nosysErrno what clone3 gets; tests pass an
// unusual errno to tell the filter's answers from the kernel's.
func build(goarch string, extra []string, denyErrno, nosysErrno uint32) ([]bpf.Instruction, error) {
	t, ok := targets[goarch]
	if !ok {
		return nil, fmt.Errorf("seccomp: %w: GOARCH %s has no syscall table (supported: amd64, arm64); run local mode on one of those", ErrUnsupported, goarch)
	}
	if err := Validate(extra); err != nil {
		return nil, err
	}
	deny := retErrno | denyErrno&0xffff
	nosys := retErrno | nosysErrno&0xffff

	// Unconditional denies: the defaults, then the extra names, each
	// once, skipping names this architecture does not have.
	var nrs []uint32
	seen := map[string]bool{}
	unconditional := map[string]bool{}
	add := func(name string) {
		if seen[name] || name == "clone3" {
			return // clone3 is always refused, with ENOSYS
		}
		seen[name] = true
		if nr, ok := t.info.SyscallNames[name]; ok {
			nrs = append(nrs, uint32(nr))
			unconditional[name] = true
		}
	}
	for _, r := range denyRules {
		add(r.name)
	}
	for _, n := range extra {
		add(n)
	}

	// The architecture first: a syscall made through another ABI (int
	// 0x80 on x86_64, AArch32 on arm64) has other numbers, which the
	// checks below would misread, so it is refused outright.
	ins := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(t.info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: deny},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if t.x32 {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: deny})
	}
	// Each check keeps the number in A: "jeq NR; ret deny" pairs, and
	// blocks that load arguments always end in a return.
	for _, nr := range nrs {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1},
			bpf.RetConstant{Val: deny})
	}
	block := func(name string, body []bpf.Instruction) {
		if unconditional[name] {
			return
		}
		nr, ok := t.info.SyscallNames[name]
		if !ok {
			return
		}
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: uint8(len(body))})
		ins = append(ins, body...)
	}
	block("socket", allowOnly(0, allowedFamilies, deny))
	block("socketpair", allowOnly(0, allowedFamilies, deny))
	block("personality", allowOnly(0, allowedPersonalities, deny))
	block("clone", []bpf.Instruction{
		// clone() reads only the low 32 bits of its flags.
		bpf.LoadAbsolute{Off: argLo(t.cloneFlags), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaceFlags, SkipFalse: 1},
		bpf.RetConstant{Val: deny},
		bpf.RetConstant{Val: retAllow},
	})
	// No set-user-ID or set-group-ID file: one left in the workspace (or a
	// read-write mount) would run as the sandbox's host uid for any local
	// user who reaches it. The mode argument of every call that sets a
	// file's mode, and of open/openat when they create a file.
	for _, r := range []struct {
		name string
		arg  int
	}{{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}, {"creat", 1}, {"mknod", 1}, {"mknodat", 2}} {
		block(r.name, denyBits(r.arg, setIDBits, deny))
	}
	block("open", denyBitsWhenCreating(1, 2, deny))
	block("openat", denyBitsWhenCreating(2, 3, deny))
	// openat2 passes its mode in memory: ENOSYS makes callers fall back to
	// openat, whose mode is checked above.
	if nr, ok := t.info.SyscallNames["openat2"]; ok && !unconditional["openat2"] {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			bpf.RetConstant{Val: nosys})
	}
	// clone3 passes its flags in memory, which a filter cannot read:
	// ENOSYS makes glibc (2.34+), Go and others fall back to clone, whose
	// flags are checked above. This is what Docker does.
	if nr, ok := t.info.SyscallNames["clone3"]; ok {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			bpf.RetConstant{Val: nosys})
	}
	ins = append(ins, bpf.RetConstant{Val: retAllow})
	if len(ins) > maxInstructions {
		return nil, fmt.Errorf("seccomp: filter has %d instructions, the kernel takes at most %d; shorten %s", len(ins), maxInstructions, ConfigKey)
	}
	return ins, nil
}

// allowOnly is the body of a block that allows the call when the 64-bit
// argument arg equals one of values and denies it otherwise. The upper
// half must be zero: these arguments are 32-bit in the kernel, which
// ignores the upper half, so a value with junk above bit 31 is denied
// rather than compared on its lower half alone.
func allowOnly(arg int, values []uint32, deny uint32) []bpf.Instruction {
	n := len(values)
	out := []bpf.Instruction{
		bpf.LoadAbsolute{Off: argHi(arg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: uint8(n + 1)},
		bpf.LoadAbsolute{Off: argLo(arg), Size: 4},
	}
	for i, v := range values {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - i)})
	}
	return append(out, bpf.RetConstant{Val: deny}, bpf.RetConstant{Val: retAllow})
}

// setIDBits are S_ISUID and S_ISGID; createFlags are O_CREAT and
// __O_TMPFILE (the same on amd64 and arm64).
const (
	setIDBits   = 0o6000
	createFlags = 0o100 | 0o20000000
)

// denyBits is the body of a block that denies the call when the mode in
// arg has any of bits set.
func denyBits(arg int, bits, deny uint32) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(arg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: bits, SkipFalse: 1},
		bpf.RetConstant{Val: deny},
		bpf.RetConstant{Val: retAllow},
	}
}

// denyBitsWhenCreating is denyBits for open and openat: the mode counts
// only when the flags create a file (without O_CREAT the mode register
// may hold anything).
func denyBitsWhenCreating(flagsArg, modeArg int, deny uint32) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(flagsArg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: createFlags, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		bpf.LoadAbsolute{Off: argLo(modeArg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setIDBits, SkipFalse: 1},
		bpf.RetConstant{Val: deny},
		bpf.RetConstant{Val: retAllow},
	}
}

// argLo and argHi are the offsets of the halves of a 64-bit argument in
// struct seccomp_data on a little-endian machine (both supported targets
// are).
func argLo(i int) uint32 { return offArgs + 8*uint32(i) }
func argHi(i int) uint32 { return offArgs + 8*uint32(i) + 4 }

// encode turns instructions into the bytes of struct sock_filter[]:
// u16 code, u8 jt, u8 jf, u32 k, little-endian like the targets.
func encode(ins []bpf.Instruction) ([]byte, error) {
	raw, err := bpf.Assemble(ins)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling the filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.LittleEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.LittleEndian.AppendUint32(out, r.K)
	}
	return out, nil
}
