// Package seccomp builds the system call filter local mode puts on every
// sandboxed command (bwrap --seccomp FD), in pure Go: no libseccomp, no
// cgo.
//
// # Shape
//
// The filter is a deny list with a default of ALLOW, modelled on Docker's
// default profile, so that python, pip, git, gcc, node and go build keep
// working (the tests run each of them under it). In order:
//
//  1. The architecture: a call made through another ABI is refused with
//     EPERM. On x86_64 that is int $0x80 (AUDIT_ARCH_I386, i386 numbers)
//     and the x32 ABI (AUDIT_ARCH_X86_64 with __X32_SYSCALL_BIT set); on
//     arm64, AArch32 tasks. Without this check, a filter that knows only
//     native numbers is bypassed by making the same call through int
//     $0x80, where the numbers differ.
//  2. Calls refused with EPERM whatever their arguments (DefaultDeny, plus
//     Options.ExtraDeny from sandbox.local.seccomp.deny).
//  3. Calls refused depending on their arguments, with EPERM.
//  4. clone3, refused with ENOSYS.
//  5. Everything else: allowed.
//
// The bwrap sandbox around the command (namespaces, no capabilities, a
// read-only root, --disable-userns) already stops most of what the
// denied calls could do. The filter is the second wall: it takes away
// kernel surface that namespaces do not cover (keyrings, AF_VSOCK, the
// clock) or that kernel exploits favour (io_uring, userfaultfd, bpf,
// perf_event_open), so that a kernel bug in it is out of reach.
//
// # Denied whatever the arguments
//
//   - keyctl, add_key, request_key: kernel keyrings are not namespaced; a
//     sandboxed process would read and link the keyrings of its uid on the
//     host, and share its key quota.
//   - io_uring_setup, io_uring_enter, io_uring_register: io_uring
//     operations are not system calls, so no filter sees them, and io_uring
//     has been a steady source of privilege escalations. Programs fall back
//     to ordinary calls (libuv, used by node, does).
//   - userfaultfd: lets an exploit stall the kernel on a page fault to win
//     races.
//   - perf_event_open: kernel address and side-channel leaks, many bugs.
//   - bpf: loads programs into the kernel.
//   - kexec_load, kexec_file_load: boot another kernel.
//   - mount, umount2, pivot_root, and the new mount API: fsopen, fsconfig,
//     fsmount, fspick, move_mount, open_tree, mount_setattr. The mount tree
//     is bwrap's; nothing inside changes it.
//   - setns, unshare: join or create namespaces (bwrap already disables
//     new user namespaces, without which the others need privileges).
//   - open_by_handle_at, name_to_handle_at: a file handle opens any file of
//     a file system whatever is bind-mounted where ("Shocker", 2014).
//   - init_module, finit_module, delete_module: kernel modules.
//   - reboot, swapon, swapoff, acct, vhangup: host-wide state.
//   - syslog: the kernel log holds kernel addresses.
//   - iopl, ioperm (x86 only): raw I/O port access.
//   - lookup_dcookie, quotactl, quotactl_fd: profiling and disk quotas.
//   - settimeofday, clock_settime, clock_adjtime, adjtimex: the realtime
//     clock is the host's (time namespaces only offset the monotonic and
//     boot clocks).
//   - uselib, ustat, sysfs, _sysctl, nfsservctl: obsolete; Docker refuses
//     them too.
//
// # Denied depending on the arguments
//
//   - socket, socketpair: only AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK
//     (glibc's getaddrinfo and getifaddrs use netlink). Every other family
//     is refused: AF_VSOCK above all, which is not network-namespaced and
//     reaches the hypervisor even with the network off; AF_PACKET,
//     AF_BLUETOOTH, AF_ALG and the rarely used families where kernel bugs
//     cluster. The family is a C int: a value with bits set above bit 31
//     (which the kernel ignores) is refused rather than judged by its low
//     half.
//   - personality: only 0 (PER_LINUX), 0x8 (PER_LINUX32), 0x20000
//     (UNAME26), 0x20008 and 0xffffffff (query), as Docker. The other
//     flags (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, ...)
//     switch off exploit mitigations.
//   - clone: refused when its flags (argument 0 on x86_64 and arm64) hold
//     a CLONE_NEW* namespace flag, as Docker does without CAP_SYS_ADMIN.
//     Threads, fork and vfork-style spawns are unaffected.
//
// # clone3
//
// clone3 passes its flags in memory, which a seccomp filter cannot read,
// so the filter cannot tell a thread from a new namespace. It answers
// ENOSYS, as if the kernel were older: glibc (2.34+), Go, and the others
// then use clone, whose flags are checked. Any other errno breaks
// pthread_create in glibc, which falls back only on ENOSYS.
//
// # ptrace stays allowed
//
// ptrace is allowed (debuggers, strace, and sanitizers need it). The
// sandbox has its own pid namespace: the only processes a command can see,
// and so trace, are the command's own; the host's processes are not
// there (the tests attach to the test's host pid and get ESRCH). Since
// Linux 4.8 the filter is re-checked after a tracer changes a system call,
// so tracing cannot smuggle a denied call past it.
//
// # Using it
//
// Program returns the raw filter (struct sock_filter[], 8 bytes per
// instruction) for the running architecture, amd64 or arm64; other
// architectures get an error wrapping ErrUnsupported, as does any GOOS
// but Linux. File puts it in a sealed memfd for bwrap --seccomp FD; use a
// new one per bwrap. Validate checks configured names; an unknown one is
// an error naming it and the fix, never silently ignored. A name that
// exists on the other supported architecture only (iopl on arm64) is
// accepted and skipped where the call does not exist.
//
// The syscall name tables come from github.com/elastic/go-seccomp-bpf's
// arch package (generated from the kernel's tables, Linux 6.15); the
// tests hold them to golang.org/x/sys/unix's numbers. The filter itself
// is assembled here with golang.org/x/net/bpf: go-seccomp-bpf's own
// policy assembler jumps to the default action (here ALLOW) for a foreign
// architecture, and compares later syscall numbers against an argument
// once an argument check has loaded one.
package seccomp
