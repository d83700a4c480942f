//go:build linux

package isolation

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// bridge puts a command behind the network bridge: the sockets and the
// bridge bound read-only, the proxy variables under the command's own,
// the bridge in front of the command; the caller's binds are not changed.
func TestEgressBridge(t *testing.T) {
	e := &Egress{Env: map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "localhost"},
		Ports: []int{3128, 1080}, SocketDir: "/run/x/net-1", BridgeExe: "/usr/bin/sage"}
	own := []Bind{{Host: "/h/venv", Inside: "/run/sage/venv"}}
	inv := e.bridge(Invocation{Argv: []string{"/bin/sh", "-c", "true"}, Binds: own, Env: map[string]string{"NO_PROXY": "*"}}, 1<<30)
	assert.Equal(t, []Bind{{Host: "/h/venv", Inside: "/run/sage/venv"},
		{Host: "/run/x/net-1", Inside: sandboxNetDir, ReadOnly: true}, {Host: "/usr/bin/sage", Inside: sandboxBridge, ReadOnly: true}}, inv.Binds)
	assert.Len(t, own, 1, "the caller's binds are not appended to")
	assert.Equal(t, map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "*"}, inv.Env, "the command's own variables win")
	assert.Equal(t, []string{sandboxBridge, "--forward", "3128=/run/sage/net/http.sock", "--forward", "1080=/run/sage/net/socks.sock",
		"--as", "1073741824", "--", "/bin/sh", "-c", "true"}, inv.Argv, "each port to its socket, then the command")
}

// Without an allowlist WithEnv leaves the variables as they are.
func TestEgressWithEnvNil(t *testing.T) {
	var e *Egress
	env := map[string]string{"A": "1"}
	assert.Equal(t, env, e.WithEnv(env))
}
