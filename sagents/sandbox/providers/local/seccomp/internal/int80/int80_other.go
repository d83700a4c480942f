//go:build !amd64

package int80

// Supported reports whether this architecture has the i386 ABI.
const Supported = false

// Getpid is not available here; it reports ENOSYS.
func Getpid() int32 { return -38 }
