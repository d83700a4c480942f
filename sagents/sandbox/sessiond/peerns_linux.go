//go:build linux

package sessiond

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerNamespaces fails unless the process at the other end of c runs in
// this daemon's user and mount namespaces: every sandbox of local mode
// has its own (bwrap makes a user namespace; runsc's file proxy, which
// connects on behalf of a gVisor sandbox, a mount namespace), so a peer
// of the daemon's own uid may still be a sandboxed process that reached
// the socket through a mount. The peer is the process that connected
// (SO_PEERCRED), pinned by a pidfd where the kernel gives one
// (SO_PEERPIDFD, Linux 6.5+), so a pid reused meanwhile is not taken for
// it.
func peerNamespaces(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	pid, pidfd := 0, -1
	var cerr error
	err = raw.Control(func(fd uintptr) {
		var cred *unix.Ucred
		if cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); cerr == nil {
			pid = int(cred.Pid)
		}
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			pidfd = v
		}
	})
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if pid <= 0 {
		return fmt.Errorf("the peer is not in this daemon's pid namespace")
	}
	for _, ns := range []string{"user", "mnt"} {
		same, err := sameNamespace(pid, ns)
		if err != nil {
			return fmt.Errorf("the peer's %s namespace: %w", ns, err)
		}
		if !same {
			return fmt.Errorf("the peer (pid %d) runs in another %s namespace than this daemon (a sandbox, or another container)", pid, ns)
		}
	}
	if pidfd >= 0 && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		return fmt.Errorf("the peer (pid %d) ended while it was checked", pid)
	}
	return nil
}

// sameNamespace reports whether pid is in this process's namespace ns.
func sameNamespace(pid int, ns string) (bool, error) {
	var a, b syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/"+ns, &a); err != nil {
		return false, err
	}
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/"+ns, &b); err != nil {
		return false, &os.PathError{Op: "stat", Path: "/proc/" + strconv.Itoa(pid) + "/ns/" + ns, Err: err}
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}
