package hostkit

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// maxDirLinks bounds the symlinks resolveDirs follows (Linux's
// MAXSYMLINKS).
const maxDirLinks = 40

// errDirEscapes is what resolveDirs returns for a directory symlink that
// leaves the root; HostFS maps it to ErrEscape.
var errDirEscapes = errors.New("a directory symlink leaves the mount")

// needResolveDirs is dirOpenFollowsSymlinks; tests force it on.
var needResolveDirs = dirOpenFollowsSymlinks

// confineDirs returns loc with its Rel resolved by resolveDirs where the
// kernel needs it, or the operation's error.
func confineDirs(root *os.Root, op string, loc Location) (Location, error) {
	if !needResolveDirs() {
		return loc, nil
	}
	rel, err := resolveDirs(root, loc.Rel)
	if errors.Is(err, errDirEscapes) {
		return loc, driver.NewPathError(op, loc.Virtual, driver.ErrEscape, "escapes its mount (through a symlink or ..)")
	}
	if err != nil {
		return loc, mapFSError(op, loc, err)
	}
	loc.Rel = rel
	return loc, nil
}

// resolveDirs returns rel with every symlink among its directory
// components (all but the last) resolved, in user space, inside root, or
// errDirEscapes when one leads out of it.
//
// os.Root walks a path one component at a time with
// openat(O_NOFOLLOW|O_DIRECTORY) and relies on the kernel refusing a
// symlink there (Linux: ENOTDIR). gVisor's VFS treats O_DIRECTORY like a
// trailing slash and follows the symlink, so under runsc an absolute
// directory symlink (ln -s / link; read link/etc/passwd) takes os.Root out
// of its root. HostFS calls this first where the kernel behaves so
// (dirOpenFollowsSymlinks); os.Root then sees no symlink in the middle of
// the path, and its own handling of the last component is right on both.
// The walk checks each component once (lstat): a directory swapped for a
// symlink between this walk and the operation is not caught on such a
// kernel.
func resolveDirs(root *os.Root, rel string) (string, error) {
	parts := strings.Split(rel, "/")
	links := 0
	for i := 0; i < len(parts)-1; i++ {
		prefix := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(prefix)
		if err != nil {
			// Missing (WriteFile creates parents) or not a directory:
			// the operation itself reports it.
			return strings.Join(parts, "/"), nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if links++; links > maxDirLinks {
			return "", &fs.PathError{Op: "resolve", Path: prefix, Err: syscall.ELOOP}
		}
		target, err := root.Readlink(prefix)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			return "", errDirEscapes
		}
		// parts[:i] holds no symlink, so ".." in target is lexical.
		joined := path.Clean(path.Join(strings.Join(parts[:i], "/"), target, strings.Join(parts[i+1:], "/")))
		if joined == ".." || strings.HasPrefix(joined, "../") {
			return "", errDirEscapes
		}
		parts, i = strings.Split(joined, "/"), -1
	}
	return strings.Join(parts, "/"), nil
}
