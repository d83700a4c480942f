//go:build linux

package local

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/netbridge"
)

// Where the bridge and the proxy sockets appear inside the sandbox.
const (
	sandboxNetDir = "/run/sage/net"
	sandboxBridge = "/run/sage/bin/" + netbridge.Name
)

// listenEgress binds the proxies to Unix sockets in a private directory,
// which is bound read-only into each sandbox: nothing else on the host
// network reaches them, and from inside they are the only way out.
func listenEgress(runtimeDir string) (*egressProxy, net.Listener, net.Listener, error) {
	exe, err := bridgeExecutable()
	if err != nil {
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
			sandbox.ErrIsolationUnavailable, err)
	}
	return exe, nil
}

// bridge rewrites an invocation to run behind the network bridge: the
// sockets directory and the bridge bound read-only, the proxy variables
// set, and the command started by the bridge once its listeners are up.
// asBytes is the RLIMIT_AS the bridge puts on the command (see gate).
func (e *egressProxy) bridge(inv invocation, asBytes int64) invocation {
	inv.binds = append(append([]bind{}, inv.binds...),
		bind{host: e.dir, inside: sandboxNetDir, readOnly: true},
		bind{host: e.exe, inside: sandboxBridge, readOnly: true})
	inv.env = e.withProxyEnv(inv.env)
	fwd := []netbridge.Forward{
		{Port: HTTPProxyPort, Socket: sandboxNetDir + "/http.sock"},
		{Port: SOCKSProxyPort, Socket: sandboxNetDir + "/socks.sock"},
	}
	inv.argv = append([]string{sandboxBridge}, netbridge.Args(fwd, asBytes, inv.argv)...)
	return inv
}
