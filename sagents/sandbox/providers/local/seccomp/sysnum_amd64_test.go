//go:build linux && amd64

package seccomp

import "golang.org/x/sys/unix"

// archSysnums are the x86-only names.
var archSysnums = map[string]uintptr{
	"iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM, "uselib": unix.SYS_USELIB,
	"ustat": unix.SYS_USTAT, "sysfs": unix.SYS_SYSFS, "_sysctl": unix.SYS__SYSCTL,
}

// The probes' numbers for x86-only calls.
const (
	sysIOPL   = unix.SYS_IOPL
	sysIOPERM = unix.SYS_IOPERM
	sysUSELIB = unix.SYS_USELIB
	sysUSTAT  = unix.SYS_USTAT
	sysSYSFS  = unix.SYS_SYSFS
	sysSYSCTL = unix.SYS__SYSCTL
)
