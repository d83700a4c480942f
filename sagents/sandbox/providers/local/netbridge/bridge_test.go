package netbridge

import (
	"bufio"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

func TestArgsRoundTrip(t *testing.T) {
	args := Args([]Forward{{3128, "/run/sage/net/http.sock"}, {1080, "/run/sage/net/socks.sock"}}, 64<<20, []string{"/bin/sh", "-c", "true"})
	assert.Equal(t, []string{"--forward", "3128=/run/sage/net/http.sock", "--forward", "1080=/run/sage/net/socks.sock",
		"--as", "67108864", "--", "/bin/sh", "-c", "true"}, args)
	var f forwards
	for _, bad := range []string{"x=/s", "0=/s", "70000=/s", "80=relative", "80"} {
		assert.Error(t, f.Set(bad), bad)
	}
	require.NoError(t, f.Set("80=/abs.sock"))
	assert.Equal(t, forwards{{80, "/abs.sock"}}, f)
}

// The bridge listens on 127.0.0.1:PORT before the command starts, carries
// bytes both ways to the Unix socket, and returns the command's status.
func TestMainBridgesAndReturnsTheExitStatus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ul, err := net.Listen("unix", sock)
	require.NoError(t, err)
	testenv.ServeConns(t, ul, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("echo " + line))
	})
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()

	status := make(chan int, 1)
	go func() {
		status <- Main(Args([]Forward{{port, sock}}, 0, []string{"/bin/sh", "-c", "sleep 2; exit 7"}))
	}()
	var c net.Conn
	require.Eventually(t, func() bool {
		c, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	c.Write([]byte("ping\n"))
	reply, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	assert.Equal(t, "echo ping\n", reply)
	select {
	case code := <-status:
		assert.Equal(t, 7, code)
	case <-time.After(20 * time.Second):
		t.Fatal("the bridge did not return")
	}
	assert.Equal(t, ExitBridgeFailed, Main([]string{"--forward", "nonsense"}))
}
