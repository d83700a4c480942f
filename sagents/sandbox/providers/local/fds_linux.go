//go:build linux

package local

import (
	"errors"
	"fmt"
	"io/fs"
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

// openWorkspace opens the workspace for --bind-fd, refusing a symlink
// anywhere on its path (openat2 RESOLVE_NO_SYMLINKS), and, when bwrap runs
// as the session's uid, a workspace that is no longer that uid's. It runs
// before every command, so a workspace swapped between commands is caught.
func openWorkspace(ws string, id *identity) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, ws, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if errors.Is(err, unix.ENOSYS) { // kernels before 5.6: O_NOFOLLOW on the last component
		fd, err = unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open workspace", Path: ws, Err: fmt.Errorf("%w (a symlink on its path, or it is gone): %w", fs.ErrPermission, err)}
	}
	f := os.NewFile(uintptr(fd), ws)
	if id != nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != id.uid {
			f.Close()
			return nil, &fs.PathError{Op: "open workspace", Path: ws, Err: fmt.Errorf("%w: no longer owned by the session's uid %d", fs.ErrPermission, id.uid)}
		}
	}
	return f, nil
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
