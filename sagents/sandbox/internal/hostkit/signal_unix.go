//go:build unix

package hostkit

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalName is the name a CommandResult gives signal s ("SIGKILL"), or
// its description when it has no name. Every mode reports signals
// through it, so the same signal reads the same everywhere.
func SignalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return s.String()
}
