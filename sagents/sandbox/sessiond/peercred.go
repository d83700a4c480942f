//go:build linux || darwin

package sessiond

import "net"

// peerUID is the uid of the process at the other end of c, as the kernel
// recorded it when it connected (fdPeerUID says how on each system).
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	uid := -1
	var cerr error
	err = raw.Control(func(fd uintptr) { uid, cerr = fdPeerUID(int(fd)) })
	if err == nil {
		err = cerr
	}
	return uid, err
}
