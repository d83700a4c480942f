//go:build unix

package sandbox

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return s.String()
}
