// Package int80 makes a system call through the i386 ABI (int $0x80) from
// a 64-bit process, which the kernel reports to seccomp as
// AUDIT_ARCH_I386 with i386 numbers: the way around a filter that only
// knows x86_64 numbers. It exists for the seccomp package's tests, which
// check that the filter refuses it.
package int80
