package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

func TestDomainFlags(t *testing.T) {
	parse := func(args ...string) (sandbox.Config, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var sf sandboxFlags
		sf.register(fs)
		if err := fs.Parse(args); err != nil {
			return sandbox.Config{}, err
		}
		return sf.config()
	}
	t.Setenv("SAGE_HOME", sandboxtest.TempDir(t))
	c, err := parse("--allow-domain", "pypi.org", "--allow-domain", "*.pythonhosted.org:443", "--deny-domain", "x.pythonhosted.org")
	require.NoError(t, err)
	assert.Equal(t, sandbox.NetworkAllowlist, c.Local.Network, "--allow-domain implies allowlist")
	assert.Equal(t, []string{"pypi.org", "*.pythonhosted.org:443"}, c.Local.AllowedDomains)
	assert.Equal(t, []string{"x.pythonhosted.org"}, c.Local.DeniedDomains)

	_, err = parse("--allow-domain", "bad domain")
	assert.ErrorContains(t, err, "allow-domain")
	_, err = parse("--network", "open", "--allow-domain", "pypi.org")
	assert.ErrorContains(t, err, "use network: allowlist")
	c, err = parse("--network", "allowlist")
	require.NoError(t, err)
	assert.Empty(t, c.Local.AllowedDomains, "allowlist with no rules: nothing gets out")
}

// TestExecNetworkAllowlist runs the built sage binary in local mode: an
// allowed address answers through the proxy, anything else gets 403.
func TestExecNetworkAllowlist(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	testenv.Command(t, "curl", testenv.SetupFix+" (apt-get install curl)")
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "through the proxy") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	target := ln.Addr().String()
	r := sage(t, sandboxtest.TempDir(t), "", "exec", "--mode", "local", "--network", "allowlist", "--allow-domain", target, "--",
		fmt.Sprintf("curl -sS http://%s/ && echo && curl -sS -D - -o /dev/null http://127.0.0.3:%d/", target, ln.Addr().(*net.TCPAddr).Port))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "through the proxy\n")
	assert.Contains(t, r.stdout, "X-Sage-Blocked: no allow rule matches 127.0.0.3:")

	r = sage(t, sandboxtest.TempDir(t), "", "exec", "--mode", "local", "--", fmt.Sprintf("curl -sS --max-time 5 http://%s/", target))
	assert.NotEqual(t, 0, r.code, "network off by default")
	assert.NotContains(t, r.stdout, "through the proxy")
}
