//go:build linux

package sessiond

import "golang.org/x/sys/unix"

// fdPeerUID reads SO_PEERCRED of the connected socket fd.
func fdPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
