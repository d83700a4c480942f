//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// requireGvisor fails (or skips with SAGE_TEST_ALLOW_SKIP=1) when runsc
// is not installed or sage does not run as root.
func requireGvisor(t testing.TB) {
	t.Helper()
	if os.Getenv("SAGE_TEST_UNPRIVILEGED") == "1" {
		t.Skip("isolation gvisor runs runsc as root; the unprivileged re-run checks bwrap")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (isolation gvisor runs runsc as root)", "run the tests as root")
	}
	testenv.Command(t, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
}

func newGvisor(t testing.TB, mutate func(*sandbox.Config)) *sandbox.Sandbox {
	t.Helper()
	requireGvisor(t)
	return newLocal(t, func(c *sandbox.Config) {
		if mutate != nil {
			mutate(c) // first: escapeConfig replaces c.Local whole
		}
		c.Local.Isolation.Linux = sandbox.IsolationGvisor
	})
}

// TestGvisorContract runs the contract suite with a runsc sandbox per
// command (fresh_per_command: true; the session sandbox, the default, has
// TestGvisorSessionContract).
func TestGvisorContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Options{
		New: func(t *testing.T) *sandbox.Sandbox {
			return newGvisor(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh })
		},
		SignalsAsExitCodes: true,
	})
}

// TestGvisorRunsOnItsOwnKernel proves the command talks to gVisor's
// Sentry, not the host kernel: the kernel version and the boot messages
// it reads are gVisor's, while bwrap's command sees the host's.
func TestGvisorRunsOnItsOwnKernel(t *testing.T) {
	host, err := os.ReadFile("/proc/version")
	require.NoError(t, err)
	g := newGvisor(t, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh })
	res, err := g.ExecuteCommand(context.Background(), "cat /proc/version; dmesg 2>/dev/null | head -n 1", sandbox.ExecOptions{})
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)
	assert.NotEqual(t, strings.TrimSpace(string(host)), strings.SplitN(res.Stdout, "\n", 2)[0])
	assert.Contains(t, strings.ToLower(res.Stdout), "gvisor")
	// The control: the same command under bwrap reads the host's kernel.
	b := newLocal(t, nil)
	res, err = b.ExecuteCommand(context.Background(), "cat /proc/version", sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(host)), strings.TrimSpace(res.Stdout))
}

// TestGvisorEscapeSuite runs every attack of the escape suite under
// gVisor with a runsc sandbox per command (the session sandbox has
// TestGvisorSessionEscapeSuite).
func TestGvisorEscapeSuite(t *testing.T) {
	requireGvisor(t)
	t.Setenv("SAGE_ESCAPE_SECRET", "hunter2")
	w := newEscapeWorld(t)
	s := newGvisor(t, func(c *sandbox.Config) { escapeConfig(w)(c); c.Local.FreshPerCommand = &fresh })
	runEscapeCases(t, s, w, false)
	w.assertIntact(t)
}

// TestGvisorLimitsAndMounts: limits, mounts, environment and uid, with a
// runsc sandbox per command and in a gVisor session sandbox.
func TestGvisorLimitsAndMounts(t *testing.T) {
	for name, f := range map[string]*bool{"per command": &fresh, "session": nil} {
		t.Run(name, func(t *testing.T) { testGvisorLimitsAndMounts(t, f) })
	}
}

func testGvisorLimitsAndMounts(t *testing.T, freshPerCommand *bool) {
	data := mkdir(t, sandboxtest.TempDir(t)+"/d")
	require.NoError(t, os.WriteFile(data+"/f", []byte("mounted"), 0o644))
	s := newGvisor(t, func(c *sandbox.Config) {
		c.Local.FreshPerCommand = freshPerCommand
		c.Local.FileSizeLimitMB = 1
		c.Mounts = []sandbox.VolumeMount{{HostPath: data, SandboxPath: "/mnt/data", ReadOnly: true}}
	})
	res, err := s.ExecuteCommand(context.Background(), "head -c 5000000 /dev/zero > big; stat -c %s big; cat /mnt/data/f; echo; pwd; id -u",
		sandbox.ExecOptions{Env: map[string]string{"GREETING": "hi"}})
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	require.Len(t, lines, 4, "stdout %q stderr %q", res.Stdout, res.Stderr)
	assert.Equal(t, "1048576", lines[0])
	assert.Equal(t, "mounted", lines[1])
	assert.Equal(t, local.DefaultVirtualWorkspace, lines[2])
	assert.NotEqual(t, "0", lines[3], "commands must not be root inside gVisor (RLIMIT_NPROC holds only without capabilities)")
	got, err := s.ReadFile(context.Background(), "big")
	require.NoError(t, err)
	assert.Len(t, got, 1<<20)
}

func TestGvisorMissingRunscIsAnErrorNotAFallback(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root", "run the tests as root")
	}
	t.Setenv("PATH", sandboxtest.TempDir(t))
	t.Setenv("SAGE_RUNSC", "")
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t),
		RuntimeDir: sandboxtest.TempDir(t), Local: sandbox.LocalConfig{Isolation: sandbox.Isolation{Linux: sandbox.IsolationGvisor}}})
	require.Error(t, err)
	require.True(t, errors.Is(err, sandbox.ErrIsolationUnavailable), "%v", err)
	require.Contains(t, err.Error(), "50-runsc.sh")
}

// BenchmarkGvisorExecTrue is Handle.ExecuteCommand of "true" with
// isolation gvisor and a runsc sandbox per command (fresh_per_command:
// true); make bench prints it against BenchmarkLocalExecTrue (bwrap) and
// the gVisor session's benchmarks from the same run.
func BenchmarkGvisorExecTrue(b *testing.B) {
	benchExecuteTrue(b, newGvisor(b, func(c *sandbox.Config) { c.Local.FreshPerCommand = &fresh }))
}

// TestGvisorAllowlist: with network allowlist the command reaches an
// allowed host service only through the egress bridge (a Unix socket into
// gVisor, --host-uds=open), and a direct connection fails.
// Both with a runsc sandbox per command and in a gVisor session sandbox.
func TestGvisorAllowlist(t *testing.T) {
	for name, f := range map[string]*bool{"per command": &fresh, "session": nil} {
		t.Run(name, func(t *testing.T) { testGvisorAllowlist(t, f) })
	}
}

func testGvisorAllowlist(t *testing.T, freshPerCommand *bool) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "HOSTSERVICE") }))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	s := newGvisor(t, func(c *sandbox.Config) {
		c.Local.FreshPerCommand = freshPerCommand
		c.Local.Network = sandbox.NetworkAllowlist
		c.Local.AllowedDomains = []string{"127.0.0.1:" + strconv.Itoa(port)}
	})
	res, err := s.ExecuteCommand(context.Background(), fmt.Sprintf(
		`perl -MIO::Socket::INET -e 'my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:%d", Timeout => 3) or print "DIRECT-REFUSED\n"'; `+
			`curl -s --noproxy '' --max-time 10 -x "$HTTP_PROXY" http://127.0.0.1:%d/ ; echo " curl=$?"`, port, port), sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.Contains(t, res.Stdout, "DIRECT-REFUSED", res.Stderr)
	assert.Contains(t, res.Stdout, "HOSTSERVICE curl=0", "through the proxy; stderr %s", res.Stderr)
}

// Issue 37: Debian 12's runsc (2022, from apt) predates --platform=systrap.
// sage must say it is too old and name a newer one as the fix, not
// "install runsc" to someone who has. The real binary comes from
// .ci/setup.d/52-runsc-debian.sh (apt-get download, never installed).
func TestOldRunscIsNamedTooOld(t *testing.T) {
	home, _ := os.UserHomeDir()
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		cache = filepath.Join(home, ".cache")
	}
	old := filepath.Join(cache, "sage", "runsc-debian", "runsc")
	if _, err := os.Stat(old); err != nil {
		testenv.Missing(t, "Debian's runsc in "+old, testenv.SetupFix+" (.ci/setup.d/52-runsc-debian.sh)")
	}
	err := local.ProbeRunsc(context.Background(), old)
	require.ErrorIs(t, err, sandbox.ErrIsolationUnavailable)
	assert.Contains(t, err.Error(), old+" (runsc version 0.0~20221219.0) is too old: it has no --platform=systrap")
	assert.Contains(t, err.Error(), "fix: install a newer runsc")
	assert.NotContains(t, err.Error(), "fix: install runsc (gVisor)", "it is installed")
	assert.NotContains(t, err.Error(), "\n")

	requireGvisor(t)
	runsc, lerr := exec.LookPath("runsc")
	require.NoError(t, lerr)
	assert.NoError(t, local.ProbeRunsc(context.Background(), runsc), "control: the runsc setup installs starts a sandbox")
}
