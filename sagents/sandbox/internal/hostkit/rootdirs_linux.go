package hostkit

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// dirOpenFollowsSymlinks reports whether this kernel follows a symlink
// for openat(O_NOFOLLOW|O_DIRECTORY), as gVisor does (Linux returns
// ENOTDIR). It probes once, in a temporary directory; when it cannot
// probe it answers true (resolveDirs is then only extra work).
var dirOpenFollowsSymlinks = sync.OnceValue(func() bool {
	dir, err := os.MkdirTemp("", "sage-dirprobe-")
	if err != nil {
		return true
	}
	defer os.RemoveAll(dir)
	if err := os.Symlink(".", filepath.Join(dir, "link")); err != nil {
		return true
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer syscall.Close(fd)
	lfd, err := syscall.Openat(fd, "link", syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	syscall.Close(lfd)
	return true
})
