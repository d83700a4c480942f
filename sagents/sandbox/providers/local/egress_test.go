//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// mapResolver stands in for DNS: test names resolve to 127.0.0.x.
type mapResolver map[string]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// serveOn runs an HTTP server on ip:0 standing in for a domain.
func serveOn(t *testing.T, ip string, h http.HandlerFunc) int {
	ln, err := net.Listen("tcp", ip+":0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func requireCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.Missing(t, "curl", testenv.SetupFix+" (apt-get install curl)")
	}
}

type eventLog struct {
	mu  sync.Mutex
	evs []local.EgressEvent
}

func (l *eventLog) observe(ev local.EgressEvent) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

func (l *eventLog) find(domain string, allowed bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.evs {
		if ev.Domain == domain && ev.Allowed == allowed {
			return true
		}
	}
	return false
}

// TestEgressAllowlist drives every path of network allowlist with curl
// from inside a sandbox: only the proxies lead out, and they only lead
// where the rules say.
func TestEgressAllowlist(t *testing.T) { egressAllowlist(t, false) }

// TestSessionEgressAllowlist runs the same checks against commands of a
// session sandbox (the bridge runs once, in front of the supervisor).
func TestSessionEgressAllowlist(t *testing.T) { egressAllowlist(t, true) }

func egressAllowlist(t *testing.T, session bool) {
	requireBwrap(t)
	requireCurl(t)
	const big = 64 << 20
	hello := serveOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) })
	large := serveOn(t, "127.0.0.2", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(big))
		buf := make([]byte, 1<<20)
		for range big >> 20 {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	loop := serveOn(t, "127.0.0.1", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "HOST LOOPBACK") })
	log := &eventLog{}
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t),
		Local: sandbox.LocalConfig{Network: sandbox.NetworkAllowlist,
			// loopback stands in for the internet here, so the test allows
			// 127.0.0.2 explicitly; 127.0.0.1 stays refused
			AllowedDomains: []string{"allowed.test:*", "*.wild.test:*", "ported.test:" + strconv.Itoa(hello), "rebind.test:*", "127.0.0.2:*"},
			DeniedDomains:  []string{"denied.wild.test"}}}
	res := mapResolver{"allowed.test": "127.0.0.2", "a.wild.test": "127.0.0.2", "denied.wild.test": "127.0.0.2",
		"ported.test": "127.0.0.2", "rebind.test": "127.0.0.1"}
	d, err := local.NewWithOptions(context.Background(), cfg, local.Options{EgressObserver: log.observe, Resolver: res,
		Session: local.SessionOptions{Enabled: session}})
	require.NoError(t, err)
	s := sandbox.NewFromDriver(cfg, d)
	t.Cleanup(func() { s.Close(context.Background()) })

	sh := func(t *testing.T, cmd string) *sandbox.CommandResult {
		t.Helper()
		r, err := s.ExecuteCommand(context.Background(), cmd, sandbox.ExecOptions{})
		require.NoError(t, err)
		return r
	}
	t.Run("proxy variables are set", func(t *testing.T) {
		r := sh(t, `echo "$HTTP_PROXY $https_proxy $ALL_PROXY $no_proxy"`)
		assert.Equal(t, "http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1,::1\n", r.Stdout)
	})
	t.Run("allowed domain over HTTP and CONNECT", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`curl -sS http://allowed.test:%d/ && echo && curl -sS --proxytunnel http://a.wild.test:%d/`, hello, hello))
		assert.Equal(t, fmt.Sprintf("hello allowed.test:%d\nhello a.wild.test:%d", hello, hello), r.Stdout, r.Stderr)
		assert.True(t, log.find("allowed.test", true))
	})
	t.Run("denied domain gets 403 naming the rule", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`curl -sS -o /dev/null -D - http://denied.wild.test:%d/`, hello))
		assert.Contains(t, r.Stdout, "403")
		assert.Contains(t, r.Stdout, "X-Sage-Blocked: denied by rule denied.wild.test")
		assert.True(t, log.find("denied.wild.test", false))
	})
	t.Run("a direct connection that bypasses the proxy fails", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`curl -sS --noproxy '*' --max-time 5 http://127.0.0.2:%d/; echo "exit $?"; curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:%d/; echo "exit $?"`, hello, loop))
		assert.NotContains(t, r.Stdout, "hello")
		assert.NotContains(t, r.Stdout, "HOST LOOPBACK")
		assert.Contains(t, r.Stdout, "exit 7", "connection refused inside the empty namespace: %s", r.Stderr)
		r = sh(t, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
		assert.Equal(t, "lo\n", r.Stdout, "no interface but loopback")
	})
	t.Run("DNS rebinding to 127.0.0.1 is refused", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`curl -sS -D - http://rebind.test:%d/`, loop))
		assert.NotContains(t, r.Stdout, "HOST LOOPBACK")
		assert.Contains(t, r.Stdout, "X-Sage-Blocked: address 127.0.0.1 is loopback")
	})
	t.Run("CONNECT to a port no rule allows", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`curl -sS --proxytunnel http://ported.test:%d/ && echo; curl -sS --proxytunnel http://ported.test:22/; echo "exit $?"`, hello))
		assert.Contains(t, r.Stdout, fmt.Sprintf("hello ported.test:%d", hello))
		assert.Contains(t, r.Stdout, "exit 56", r.Stderr)
		assert.Contains(t, r.Stderr, "403")
	})
	t.Run("SOCKS5 with remote names through the bridge", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`curl -sS --socks5-hostname 127.0.0.1:1080 http://allowed.test:%d/; echo; curl -sS --socks5-hostname 127.0.0.1:1080 http://denied.wild.test:%d/; echo "exit $?"`, hello, hello))
		assert.Contains(t, r.Stdout, fmt.Sprintf("hello allowed.test:%d", hello))
		assert.Contains(t, r.Stdout, "exit 97", r.Stderr)
	})
	t.Run("large download", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`curl -sS http://allowed.test:%d/ | wc -c`, large))
		assert.Equal(t, strconv.Itoa(big), strings.TrimSpace(r.Stdout), r.Stderr)
	})
	t.Run("many parallel connections", func(t *testing.T) {
		r := sh(t, fmt.Sprintf(`for i in $(seq 40); do (curl -sS http://allowed.test:%[1]d/$i; echo) & (curl -sS --socks5-hostname 127.0.0.1:1080 http://a.wild.test:%[1]d/; echo) & done; wait`, hello))
		assert.Equal(t, 40, strings.Count(r.Stdout, "hello allowed.test"), r.Stderr)
		assert.Equal(t, 40, strings.Count(r.Stdout, "hello a.wild.test"), r.Stderr)
	})
	t.Run("exit codes and signals pass through the bridge", func(t *testing.T) {
		r := sh(t, `exit 3`)
		assert.Equal(t, 3, r.ExitCode)
		r = sh(t, `kill -9 $$`)
		assert.False(t, r.Success)
		assert.Equal(t, 137, r.ExitCode)
	})
}

// TestEgressLimitsStillHold: the bridge takes RLIMIT_AS off the sandbox
// as a whole and puts it on the command; a memory hog is still stopped.
func TestEgressLimitsStillHold(t *testing.T) {
	s := newLocal(t, func(c *sandbox.Config) {
		c.Local = sandbox.LocalConfig{Network: sandbox.NetworkAllowlist, MemoryLimitMB: 64, FileSizeLimitMB: 1}
		if !cgroupWritable("memory") { // refused there: the default, per process, stands
			c.Local.MemoryLimitMB = 0
		}
	})
	r, err := s.ExecuteCommand(context.Background(), `perl -e '$x = "a" x (1 << 32); print "ESCAPED"'; head -c 5000000 /dev/zero > big; stat -c %s big`, sandbox.ExecOptions{})
	require.NoError(t, err)
	assert.NotContains(t, r.Stdout, "ESCAPED")
	assert.Contains(t, r.Stdout, "1048576")
}

func TestEgressBackgroundTaskAndClose(t *testing.T) {
	requireCurl(t)
	port := serveOn(t, "127.0.0.2", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "bg ok") })
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t),
		Local: sandbox.LocalConfig{Network: sandbox.NetworkAllowlist, AllowedDomains: []string{"bg.test:*", "127.0.0.2:*"}}}
	requireBwrap(t)
	d, err := local.NewWithOptions(context.Background(), cfg, local.Options{Resolver: mapResolver{"bg.test": "127.0.0.2"}})
	require.NoError(t, err)
	s := sandbox.NewFromDriver(cfg, d)
	task, err := s.StartBackground(context.Background(), fmt.Sprintf("curl -sS http://bg.test:%d/", port), sandbox.ExecOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := s.BackgroundStatus(context.Background(), task.ID)
		return err == nil && !st.Alive
	}, 20e9, 50e6)
	out, err := s.ReadBackgroundOutput(context.Background(), task.ID, 0, 1<<10)
	require.NoError(t, err)
	assert.Contains(t, out.Text, "bg ok")
	before := socketDirs(cfg.RuntimeDir)
	require.NotEmpty(t, before)
	require.NoError(t, s.Close(context.Background()))
	assert.Len(t, socketDirs(cfg.RuntimeDir), len(before)-1, "Close removes the socket directory")
}

// socketDirs lists the proxy socket directories in the runtime dir and,
// for runtime dirs too long for socket paths, the temporary directory.
func socketDirs(runtimeDir string) []string {
	var out []string
	for _, d := range []string{runtimeDir, os.TempDir()} {
		m, _ := filepath.Glob(filepath.Join(d, "net-*", "http.sock"))
		out = append(out, m...)
	}
	return out
}

func TestEgressAllowlistNeedsIsolation(t *testing.T) {
	requireBwrap(t)
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t),
		Local: sandbox.LocalConfig{Network: sandbox.NetworkAllowlist, Isolation: sandbox.Isolation{Linux: sandbox.IsolationNone}}})
	var ce *sandbox.ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "sandbox.local.network", ce.Field)
}
