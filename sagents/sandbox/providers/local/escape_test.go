//go:build linux

package local_test

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// escapeWorld is what the attacks aim at, set up on the host.
type escapeWorld struct {
	outside, other, roDir string
	port                  int
	accepted              *atomic.Int32
}

func newEscapeWorld(t *testing.T) escapeWorld {
	w := escapeWorld{outside: sandboxtest.TempDir(t), other: sandboxtest.TempDir(t), roDir: sandboxtest.TempDir(t), accepted: &atomic.Int32{}}
	require.NoError(t, os.WriteFile(filepath.Join(w.outside, "secret.txt"), []byte("TOPSECRET"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.other, "notes.txt"), []byte("OTHERSESSION"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.roDir, "ro.txt"), []byte("original"), 0o644))
	for _, d := range []string{w.outside, w.other, w.roDir} {
		os.Chmod(d, 0o755) // readable by the unprivileged re-run too
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	w.port = ln.Addr().(*net.TCPAddr).Port
	testenv.ServeConns(t, ln, func(c net.Conn) {
		w.accepted.Add(1)
		c.Write([]byte("HOSTSERVICE\n"))
	})
	return w
}

// assertIntact checks the host side after the attacks: the read-only
// mount unchanged, nothing planted outside the workspace, no connection
// to the host service.
func (w escapeWorld) assertIntact(t *testing.T) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(w.roDir, "ro.txt"))
	require.NoError(t, err)
	assert.Equal(t, "original", string(got))
	_, err = os.Stat(filepath.Join(w.outside, "planted"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Zero(t, w.accepted.Load(), "the host service got a connection")
}

type escapeCase struct {
	name    string // what the attack tries, in one line
	cmd     string // prints ESCAPED only if the attack worked
	control bool   // harmless enough to prove the attack works without a sandbox
	check   func(t *testing.T, res *sandbox.CommandResult)
}

func escapeCases(w escapeWorld, hostPID int) []escapeCase {
	connect := fmt.Sprintf(`perl -MIO::Socket::INET -e 'my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:%d", Timeout => 3) or exit 7; print "ESCAPED" if <$s> =~ /HOSTSERVICE/'`, w.port)
	return []escapeCase{
		{name: "read /etc/shadow", cmd: `grep -q '^root:' /etc/shadow && echo ESCAPED`, control: true},
		{name: "read a host file outside the workspace by its host path", cmd: `grep -q TOPSECRET ` + w.outside + `/secret.txt && echo ESCAPED`, control: true},
		{name: "read another session's workspace", cmd: `grep -q OTHERSESSION ` + w.other + `/notes.txt && echo ESCAPED`, control: true},
		{name: "climb out of the workspace with ..", cmd: `grep -rqs TOPSECRET ../../../../../..` + w.outside + ` && echo ESCAPED`},
		{name: "write a file next to the host secret", cmd: `echo x > ` + w.outside + `/planted && echo ESCAPED`, control: true},
		{name: "write into /usr", cmd: `echo x > /usr/planted 2>/dev/null && echo ESCAPED`},
		{name: "write into /etc", cmd: `echo x >> /etc/hosts 2>/dev/null && echo ESCAPED`},
		{name: "write into a read-only mount", cmd: `echo changed > /mnt/ro/ro.txt && echo ESCAPED`},
		{name: "delete from a read-only mount", cmd: `rm -f /mnt/ro/ro.txt && test ! -e /mnt/ro/ro.txt && echo ESCAPED`},
		{name: "symlink to a host path, then read it", cmd: `ln -s ` + w.outside + `/secret.txt s && grep -q TOPSECRET s && echo ESCAPED`},
		{name: "see host processes in /proc", cmd: fmt.Sprintf(`test -e /proc/%d && echo ESCAPED; n=$(ls /proc | grep -c '^[0-9]*$'); [ "$n" -gt 20 ] && echo ESCAPED`, hostPID), control: true},
		{name: "read the parent's environment through /proc", cmd: fmt.Sprintf(`grep -qa PATH= /proc/%d/environ && echo ESCAPED`, hostPID), control: true},
		{name: "read the parent's environment secrets", cmd: `env | grep -q hunter2 && echo ESCAPED`},
		{name: "signal the parent", cmd: fmt.Sprintf(`kill -0 %d 2>/dev/null && echo ESCAPED`, hostPID), control: true},
		{name: "kill every process it can see", cmd: `kill -9 -1; echo survived`},
		{name: "connect to a host service on 127.0.0.1 with network off", cmd: connect, control: true},
		{name: "see a network interface other than lo", cmd: `tail -n +3 /proc/net/dev | grep -qv 'lo:' && echo ESCAPED`},
		{name: "gain privileges through a setuid binary", cmd: `grep -q 'NoNewPrivs:.*0' /proc/self/status && echo ESCAPED; su -c true root </dev/null 2>/dev/null && echo ESCAPED`},
		{name: "hold capabilities", cmd: `grep -q 'CapEff:.*0000000000000000' /proc/self/status || echo ESCAPED`},
		{name: "mount a filesystem", cmd: `mkdir -p /tmp/m && mount -t tmpfs none /tmp/m 2>/dev/null && echo ESCAPED`},
		{name: "create a user namespace to regain capabilities", cmd: `unshare -r true 2>/dev/null && echo ESCAPED`},
		{name: "ptrace a process outside", cmd: fmt.Sprintf(`test -r /proc/%d/mem && echo ESCAPED; perl -e 'require "syscall.ph"; syscall(&SYS_ptrace, 16, %d, 0, 0) == 0 and print "ESCAPED"' 2>/dev/null`, hostPID, hostPID)},
		{name: "chroot back to the host root", cmd: `chroot / true 2>/dev/null && echo ESCAPED`},
		{name: "change the hostname", cmd: `hostname pwned 2>/dev/null && echo ESCAPED`},
		{name: "reach the Docker socket", cmd: `test -e /var/run/docker.sock -o -e /run/docker.sock && echo ESCAPED`},
		{name: "read the host's home directories", cmd: `ls /root /home 2>/dev/null | grep -q . && echo ESCAPED`},
		{name: "open a raw disk device", cmd: `ls /dev | grep -Eq '^(sd|vd|nvme|xvd)' && echo ESCAPED`},
		{name: "write kernel settings in /proc/sys", cmd: `echo 1 > /proc/sys/kernel/sysrq 2>/dev/null && echo ESCAPED`},
		{name: "fork bomb", cmd: `f() { f | f & }; f 2>/dev/null; sleep 2; n=$(ls /proc | grep -c '^[0-9]*$'); [ "$n" -gt 80 ] && echo ESCAPED; echo bounded`},
		{name: "memory bomb", cmd: `perl -e '$x = "a" x (1 << 32); print "ESCAPED"'`}, // above the default limit too
		{name: "CPU spin past the CPU-time limit", cmd: `while :; do :; done; echo ESCAPED`},
		{name: "fill the disk past the file-size limit", cmd: `head -c 100000000 /dev/zero > big 2>/dev/null; [ "$(stat -c %s big)" -gt 10485760 ] && echo ESCAPED; rm -f big`},
		{name: "fill the private /tmp", cmd: `for i in 1 2 3 4 5 6 7 8; do head -c 10485760 /dev/zero > /tmp/f$i 2>/dev/null; done; [ "$(du -sm /tmp | cut -f1)" -gt 64 ] && echo ESCAPED; true`},
	}
}

func escapeConfig(w escapeWorld) func(*sandbox.Config) {
	return func(c *sandbox.Config) {
		c.Mounts = []sandbox.VolumeMount{{HostPath: w.roDir, SandboxPath: "/mnt/ro", ReadOnly: true}}
		c.Local = sandbox.LocalConfig{CPUTimeLimit: 2 * time.Second, MemoryLimitMB: 64, PidsLimit: 64, FileSizeLimitMB: 10}
		// Without a writable cgroup (the unprivileged re-run) a CPU time
		// limit and an explicit memory limit are refused (TestLimitCPUTime
		// and TestLimitMemory check it): the defaults stand instead.
		if !cgroupWritable("cpuacct") {
			c.Local.CPUTimeLimit = 0
		}
		if !cgroupWritable("memory") {
			c.Local.MemoryLimitMB = 0
		}
		c.Timeout = 30 * time.Second
	}
}

// escapeNeeds names the cases that need a limit only a cgroup gives.
var escapeNeeds = map[string]string{"CPU spin past the CPU-time limit": "cpuacct", "fill the private /tmp": "memory"}

// runEscapeCases runs every attack of the escape suite through
// ExecuteCommand of s, each as a subtest that fails when the attack
// printed ESCAPED or the wall clock rather than a limit stopped it. With
// needCgroups, an attack whose limit only a cgroup gives is skipped where
// no such cgroup is writable (the limit is refused there).
func runEscapeCases(t *testing.T, s *sandbox.Sandbox, w escapeWorld, needCgroups bool) {
	t.Helper()
	for _, tc := range escapeCases(w, os.Getpid()) {
		t.Run(tc.name, func(t *testing.T) {
			if ctl := escapeNeeds[tc.name]; needCgroups && ctl != "" && !cgroupWritable(ctl) {
				t.Skipf("needs a %s cgroup: without one the limit is refused", ctl)
			}
			start := time.Now()
			res, err := s.ExecuteCommand(context.Background(), tc.cmd, sandbox.ExecOptions{})
			require.NoError(t, err)
			assert.NotContains(t, res.Stdout, "ESCAPED", "stderr: %s", res.Stderr)
			assert.False(t, res.TimedOut, "the limits, not the wall clock, should stop it (took %v)", time.Since(start))
		})
	}
}

// TestEscapeSuite runs each attack through ExecuteCommand in local mode
// with a fresh sandbox per command (fresh_per_command: true; the session
// sandbox, the default, has TestSessionEscapeSuite) and asserts it is
// blocked; the host side is checked afterwards.
func TestEscapeSuite(t *testing.T) {
	t.Setenv("SAGE_ESCAPE_SECRET", "hunter2")
	w := newEscapeWorld(t)
	s := newLocal(t, func(c *sandbox.Config) { escapeConfig(w)(c); c.Local.FreshPerCommand = &fresh })
	require.Zero(t, s.Driver().(*local.Sandbox).SessionPID())
	require.GreaterOrEqual(t, len(escapeCases(w, os.Getpid())), 25)
	runEscapeCases(t, s, w, true)
	w.assertIntact(t)

	t.Run("symlink made inside, read from the host side through the file API", func(t *testing.T) {
		res, err := s.ExecuteCommand(context.Background(), "ln -s /etc/passwd host_passwd && ln -s / rootlink", sandbox.ExecOptions{})
		require.NoError(t, err)
		require.True(t, res.Success, res.Stderr)
		_, err = s.ReadFile(context.Background(), "host_passwd")
		assert.ErrorIs(t, err, fs.ErrPermission)
		err = s.WriteFile(context.Background(), "rootlink/tmp/planted", []byte("x"), sandbox.WriteOptions{})
		assert.ErrorIs(t, err, fs.ErrPermission)
	})
}

// TestEscapeSuiteControl runs the harmless attacks without a sandbox, to
// prove that they detect an escape when there is one.
func TestEscapeSuiteControl(t *testing.T) {
	if os.Getenv("SAGE_TEST_UNPRIVILEGED") == "1" {
		t.Skip("run once, as the invoking user")
	}
	t.Setenv("SAGE_HOME", sandboxtest.TempDir(t))
	t.Setenv("SAGE_ESCAPE_SECRET", "hunter2")
	w := newEscapeWorld(t)
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: sandboxtest.TempDir(t)})
	require.NoError(t, err)
	defer h.Close(context.Background())
	n := 0
	for _, tc := range escapeCases(w, os.Getpid()) {
		if !tc.control {
			continue
		}
		n++
		res, err := h.ExecuteCommand(context.Background(), tc.cmd, sandbox.ExecOptions{Env: map[string]string{}})
		require.NoError(t, err)
		assert.Contains(t, res.Stdout, "ESCAPED", "control %q did not detect the unsandboxed escape; stderr %s", tc.name, res.Stderr)
	}
	assert.GreaterOrEqual(t, n, 7)
}

// TestHostStaysResponsiveDuringForkBomb times a host command while a fork
// bomb runs in the sandbox.
func TestHostStaysResponsiveDuringForkBomb(t *testing.T) {
	s := newLocal(t, func(c *sandbox.Config) { c.Local.PidsLimit = 64 })
	// The processes of the session sandbox, counted from inside (its pid
	// namespace): a count of the host's would take other programs' for
	// the bomb's. The shell counts its glob itself, forking nothing: a
	// pipeline's second process would be counted or not depending on
	// whether it was forked before the first expanded the glob.
	procs := func() int {
		r, err := s.ExecuteCommand(context.Background(), `set -- /proc/[0-9]*; echo $#`, sandbox.ExecOptions{Timeout: 10 * time.Second})
		require.NoError(t, err)
		return atoi(strings.TrimSpace(r.Stdout))
	}
	list := func() string {
		r, _ := s.ExecuteCommand(context.Background(), `for p in /proc/[0-9]*; do echo "$(cut -d' ' -f1-5 $p/stat 2>/dev/null) $(tr '\0' ' ' <$p/cmdline 2>/dev/null)"; done`, sandbox.ExecOptions{Timeout: 10 * time.Second})
		return r.Stdout
	}
	before := procs()
	require.Positive(t, before)
	beforeList := list()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ExecuteCommand(context.Background(), `f() { f | f & }; f 2>/dev/null; sleep 4`, sandbox.ExecOptions{Timeout: 6 * time.Second})
	}()
	time.Sleep(time.Second)
	start := time.Now()
	require.NoError(t, exec.Command("/bin/true").Run())
	assert.Less(t, time.Since(start), 3*time.Second, "host fork/exec during the bomb")
	<-done
	after := procs()
	for deadline := time.Now().Add(10 * time.Second); after > before && time.Now().Before(deadline); after = procs() {
		time.Sleep(200 * time.Millisecond)
	}
	if after > before {
		t.Errorf("bomb processes (or their zombies) survived the command: %d processes after, %d before; the session's processes (pid comm state ppid pgid cmdline) before:\n%s\nnow:\n%s", after, before, beforeList, list())
	}
}

func atoi(s string) int {
	n := 0
	fmt.Sscan(s, &n)
	return n
}
