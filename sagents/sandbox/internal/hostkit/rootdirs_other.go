//go:build !linux

package hostkit

// dirOpenFollowsSymlinks: gVisor is Linux-only; other kernels refuse a
// symlink for openat(O_NOFOLLOW|O_DIRECTORY).
func dirOpenFollowsSymlinks() bool { return false }
