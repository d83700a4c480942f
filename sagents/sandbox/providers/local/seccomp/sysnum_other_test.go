//go:build linux && !amd64

package seccomp

var archSysnums = map[string]uintptr{}

// The x86-only probes never run here.
const sysIOPL, sysIOPERM, sysUSELIB, sysUSTAT, sysSYSFS, sysSYSCTL = 0, 0, 0, 0, 0, 0
