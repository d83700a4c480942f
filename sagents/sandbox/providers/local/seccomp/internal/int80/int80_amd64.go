package int80

// Supported reports whether this architecture has the i386 ABI.
const Supported = true

// Getpid calls getpid (20 on i386) through int $0x80 and returns what the
// kernel put in eax: the pid, or -errno.
func Getpid() int32 { return int32(getpid()) }

func getpid() uint64
