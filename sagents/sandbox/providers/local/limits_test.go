//go:build linux

package local_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func run(t *testing.T, h *sandbox.Sandbox, cmd string, opts sandbox.ExecOptions) *sandbox.CommandResult {
	t.Helper()
	res, err := h.ExecuteCommand(context.Background(), cmd, opts)
	require.NoError(t, err)
	return res
}

func TestLimitCPUTime(t *testing.T) {
	s := newLimited(t, "cpuacct", func(c *sandbox.Config) { c.Local.CPUTimeLimit = time.Second })
	if s == nil {
		return
	}
	start := time.Now()
	res := run(t, s, "while :; do :; done", sandbox.ExecOptions{Timeout: 30 * time.Second})
	assert.False(t, res.TimedOut, "the CPU limit, not the timeout, must stop it")
	assert.False(t, res.Success)
	assert.True(t, res.CPUTimeExceeded)
	assert.Equal(t, 128+24, res.ExitCode, "SIGXCPU")
	assert.Less(t, time.Since(start), 20*time.Second)
}

func TestLimitMemory(t *testing.T) {
	s := newLimited(t, "memory", func(c *sandbox.Config) { c.Local.MemoryLimitMB = 64 })
	if s == nil {
		return
	}
	res := run(t, s, `perl -e '$x = "a" x (512 << 20); print length($x), "\n"'`, sandbox.ExecOptions{})
	assert.False(t, res.Success, "a 512 MB string fit in a 64 MB sandbox: %+v", res)
	assert.NotContains(t, res.Stdout, "536870912")
	res = run(t, s, `perl -e '$x = "a" x (16 << 20); print length($x), "\n"'`, sandbox.ExecOptions{})
	assert.True(t, res.Success, "16 MB must fit: %s", res.Stderr)
}

func TestLimitPids(t *testing.T) {
	s := newLocal(t, func(c *sandbox.Config) { c.Local.PidsLimit = 20 })
	res := run(t, s, `perl -e 'my $n = 0; while ($n < 100) { my $p = fork(); last unless defined $p; if (!$p) { sleep 5; exit 0 } $n++ } print "$n\n"'`,
		sandbox.ExecOptions{})
	require.True(t, res.Success, res.Stderr)
	n := atoi(strings.TrimSpace(res.Stdout))
	assert.Greater(t, n, 5, "some forks must work")
	assert.Less(t, n, 20, "forks past the pids limit of 20")
}

func TestLimitFileSize(t *testing.T) {
	s := newLocal(t, func(c *sandbox.Config) { c.Local.FileSizeLimitMB = 10 })
	res := run(t, s, `head -c 1000000000 /dev/zero > big; echo "exit=$?"; stat -c %s big`, sandbox.ExecOptions{})
	assert.Contains(t, res.Stdout, "exit=153", "SIGXFSZ ends the writer") // 128 + SIGXFSZ(25)
	assert.Contains(t, res.Stdout, "\n10485760\n")
}

func TestNetworkOffAndOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	testenv.ServeConns(t, ln, func(c net.Conn) { c.Write([]byte("HELLO\n")) })
	probe := fmt.Sprintf(`perl -MIO::Socket::INET -e 'my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:%d", Timeout => 3) or die "no connection\n"; print scalar <$s>'`,
		ln.Addr().(*net.TCPAddr).Port)
	off := newLocal(t, nil)
	res := run(t, off, probe, sandbox.ExecOptions{})
	assert.False(t, res.Success)
	assert.Contains(t, res.Stderr, "no connection")
	open := newLocal(t, func(c *sandbox.Config) { c.Local.Network = sandbox.NetworkOpen })
	res = run(t, open, probe, sandbox.ExecOptions{})
	assert.Equal(t, "HELLO\n", res.Stdout, res.Stderr)
}

// A workspace and a mount under /tmp stay visible over the private /tmp.
func TestWorkspaceUnderTmpStaysVisible(t *testing.T) {
	data := sandboxtest.TempDir(t)
	os.Chmod(data, 0o755)
	require.NoError(t, os.WriteFile(data+"/d.txt", []byte("data"), 0o644))
	s := newLocal(t, func(c *sandbox.Config) {
		c.VirtualWorkspace = "/tmp/ws"
		c.Mounts = []sandbox.VolumeMount{{HostPath: data, SandboxPath: "/tmp/data", ReadOnly: true}}
	})
	require.NoError(t, s.WriteFile(context.Background(), "f.txt", []byte("ws"), sandbox.WriteOptions{}))
	res := run(t, s, "pwd; cat f.txt /tmp/data/d.txt; echo new > g.txt", sandbox.ExecOptions{})
	assert.Equal(t, "/tmp/ws\nwsdata", res.Stdout, res.Stderr)
	got, err := os.ReadFile(s.HostWorkspacePath() + "/g.txt")
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(got))
}

// TestTimeoutKillsTheWholeTree: with a fresh sandbox per command, a
// timeout kills every process of the command, setsid ones included (in
// the session sandbox it kills the command's process group, and, with a
// CPU limit, everything in the command's CPU cgroup).
func TestTimeoutKillsTheWholeTree(t *testing.T) {
	s := newLocal(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh })
	start := time.Now()
	res := run(t, s, "echo begun; (sleep 101 &); sleep 101 & setsid sleep 101 & wait", sandbox.ExecOptions{Timeout: time.Second})
	assert.True(t, res.TimedOut)
	assert.Equal(t, "begun\n", res.Stdout)
	assert.Less(t, time.Since(start), 3*time.Second+driver.DefaultKillGrace)
	assert.Eventually(t, func() bool { return countProcs("sleep\x00101") == 0 }, 3*time.Second, 50*time.Millisecond,
		"sleep processes survived, even the setsid one")
}

func countProcs(cmdline string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), cmdline) {
			n++
		}
	}
	return n
}
