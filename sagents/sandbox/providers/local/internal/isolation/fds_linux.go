//go:build linux

package isolation

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// sealInheritedFDs marks every descriptor above stderr close-on-exec. Go
// opens its own that way, but a descriptor the caller of this program left
// open (sage exec ... 8</) would otherwise pass through bwrap into the
// command: a handle on a host directory. Only stdio and the files given
// to each child explicitly (dup'ed by os/exec) reach bwrap.
func sealInheritedFDs() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd") // kernels before 5.11
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}

// withUmask sets the file mode creation mask of the command: prepended to
// a shell command on its first line (line numbers stay), else through a
// shell that sets it and execs the command.
func withUmask(argv []string, set string) []string {
	if len(argv) >= 3 && argv[0] == shell && argv[1] == "-c" {
		out := append([]string{}, argv...)
		out[2] = set + "; " + argv[2]
		return out
	}
	return append([]string{shell, "-c", set + ` && exec "$@"`, "sh"}, argv...)
}
