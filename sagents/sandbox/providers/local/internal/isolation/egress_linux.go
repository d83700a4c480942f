//go:build linux

package isolation

import "github.com/sage-go/sage/sagents/sandbox/providers/local/netbridge"

// Where the bridge and the proxy sockets appear inside the sandbox.
const (
	sandboxNetDir = "/run/sage/net"
	sandboxBridge = "/run/sage/bin/" + netbridge.Name
)

// bridge rewrites an invocation to run behind the network bridge: the
// sockets directory and the bridge bound read-only, the proxy variables
// set, and the command started by the bridge once its listeners are up.
// asBytes is the RLIMIT_AS the bridge puts on the command (see gate).
func (e *Egress) bridge(inv Invocation, asBytes int64) Invocation {
	inv.Binds = append(append([]Bind{}, inv.Binds...),
		Bind{Host: e.SocketDir, Inside: sandboxNetDir, ReadOnly: true},
		Bind{Host: e.BridgeExe, Inside: sandboxBridge, ReadOnly: true})
	inv.Env = e.WithEnv(inv.Env)
	var fwd []netbridge.Forward
	for i, name := range []string{"http.sock", "socks.sock"} {
		fwd = append(fwd, netbridge.Forward{Port: e.Ports[i], Socket: sandboxNetDir + "/" + name})
	}
	inv.Argv = append([]string{sandboxBridge}, netbridge.Args(fwd, asBytes, inv.Argv)...)
	return inv
}
