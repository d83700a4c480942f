//go:build linux

package local

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/netbridge"
)

// listenEgress binds the proxies to Unix sockets in a private directory,
// which is bound read-only into each sandbox: nothing else on the host
// network reaches them, and from inside they are the only way out.
func listenEgress(runtimeDir string, id *uids.Identity) (*egressProxy, net.Listener, net.Listener, error) {
	exe, err := bridgeExecutable()
	if err != nil {
		return nil, nil, nil, err
	}
	if exe, err = reachableCopy(exe, runtimeDir, netbridge.Name, id); err != nil {
		return nil, nil, nil, err
	}
	dir, err := socketDir(runtimeDir)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := listenUnix(dir, "http.sock")
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	s, err := listenUnix(dir, "socks.sock")
	if err != nil {
		h.Close()
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	if id != nil { // bwrap and the bridge run as the session's uid: they search the directory (root's) and connect to the sockets (theirs)
		if err := os.Chmod(dir, 0o711); err != nil {
			h.Close()
			s.Close()
			os.RemoveAll(dir)
			return nil, nil, nil, fmt.Errorf("local: egress proxy sockets: %w", err)
		}
		for _, p := range []string{filepath.Join(dir, "http.sock"), filepath.Join(dir, "socks.sock")} {
			if err := os.Lchown(p, id.UID, id.GID); err != nil {
				h.Close()
				s.Close()
				os.RemoveAll(dir)
				return nil, nil, nil, fmt.Errorf("local: egress proxy sockets: %w", err)
			}
		}
	}
	e := &egressProxy{dir: dir, exe: exe, httpAddr: "127.0.0.1:" + strconv.Itoa(HTTPProxyPort),
		socksAddr: "127.0.0.1:" + strconv.Itoa(SOCKSProxyPort)}
	return e, h, s, nil
}

// bridgeExecutable is this very program, which serves as the bridge
// inside the sandbox (it links netbridge).
func bridgeExecutable() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("%w: network allowlist: cannot find this program to run as the network bridge: %w",
			driver.ErrIsolationUnavailable, err)
	}
	return exe, nil
}

// isolation is how the backend puts commands behind the proxies: the
// bridge forwards the loopback ports inside to the sockets. Nil without
// an allowlist.
func (e *egressProxy) isolation() *isolation.Egress {
	if e == nil {
		return nil
	}
	return &isolation.Egress{Env: e.env(), Ports: []int{HTTPProxyPort, SOCKSProxyPort}, SocketDir: e.dir, BridgeExe: e.exe}
}

// reachableCopy returns exe when the session's uid can reach it, else a
// hard link to it (a copy across file systems) named name in the runtime
// directory: bwrap resolves bind sources as that uid, and a test binary
// or a binary under /root is out of its reach.
func reachableCopy(exe, runtimeDir, name string, id *uids.Identity) (string, error) {
	if uids.Reachable(exe, id, uids.NeedRead|uids.NeedExec) == nil {
		return exe, nil
	}
	dst := filepath.Join(runtimeDir, name)
	os.Remove(dst)
	if err := os.Link(exe, dst); err != nil {
		if err := copyExecutable(exe, dst); err != nil {
			return "", fmt.Errorf("local: %s: %w", name, err)
		}
	}
	if err := uids.Reachable(dst, id, uids.NeedRead|uids.NeedExec); err != nil {
		if err := copyExecutable(exe, dst); err != nil { // a link keeps the mode of the original
			return "", fmt.Errorf("local: %s: %w", name, err)
		}
	}
	return dst, nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	os.Remove(dst)
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}
