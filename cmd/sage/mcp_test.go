package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// mcpStdio starts `sage mcp ARGS` as a subprocess and connects an SDK
// client to it over stdio.
func mcpStdio(t *testing.T, env []string, args ...string) (*mcp.ClientSession, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(sageBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"SAGE_HOME=" + sandboxtest.TempDir(t)}, env...)...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	client := mcp.NewClient(&mcp.Implementation{Name: "sage-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "sage mcp log:\n%s", logs.String())
	watchdog(t, cmd)
	t.Cleanup(func() { cs.Close() })
	return cs, logs
}

// callTool returns the text and, for a failure, the error code.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	require.Len(t, res.Content, 1)
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError {
		return text, ""
	}
	var e tools.Error
	require.NoError(t, json.Unmarshal([]byte(text), &e), text)
	return text, e.Code
}

func builtinNames() []string {
	var names []string
	for _, tl := range tools.Builtins(tools.BuiltinOptions{}) {
		names = append(names, tl.Name())
	}
	sort.Strings(names)
	return names
}

func listedNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	return names
}

// TestMCPStdioPassthrough drives `sage mcp` as an MCP host would, with its
// calls exported over OTLP.
func TestMCPStdioPassthrough(t *testing.T) {
	rcv, endpoint := serveOTLP(t)

	ws := sandboxtest.TempDir(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("rules:\n  - name: no-curl\n    match: '^curl '\n    decision: deny\n    reason: no downloads here\n"), 0o644))
	cs, logs := mcpStdio(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_METRICS_EXPORTER=none"},
		"--mode", "passthrough", "--workspace", ws, "--session", "mcp-e2e", "--policy", policy)
	assert.Equal(t, builtinNames(), listedNames(t, cs))

	text, code := callTool(t, cs, "execute_shell_command", map[string]any{"command": "echo hello > out.txt; cat out.txt"})
	require.Empty(t, code, text)
	assert.Contains(t, text, "hello")
	b, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	require.NoError(t, err, "the command ran in the workspace given")
	assert.Equal(t, "hello\n", string(b))

	_, code = callTool(t, cs, "execute_shell_command", map[string]any{"command": "curl http://127.0.0.1:1/"})
	assert.Equal(t, tools.CodePolicyDenied, code, "--policy applies")
	text, code = callTool(t, cs, "execute_shell_command", map[string]any{"command": "git push"})
	assert.Equal(t, tools.CodeNotApproved, code, "the built-in ask rules still apply")
	assert.Contains(t, text, "--approve-all", "the error names the fix")
	_, code = callTool(t, cs, "file_read", map[string]any{"path": "../../etc/passwd"})
	assert.Equal(t, tools.CodePermission, code)

	require.NoError(t, cs.Close(), "sage mcp log:\n%s", logs.String())
	// The exporter flushes when sage mcp exits at the end of stdin.
	require.Eventually(t, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.spans["execute_tool execute_shell_command"] >= 3 && rcv.spans["execute_tool file_read"] == 1
	}, 10*time.Second, 50*time.Millisecond, "spans: %v\nlog:\n%s", rcv.spans, logs.String())
}

// TestMCPStdioLocal: the default mode is the bubblewrap sandbox; with
// --approve-all an ask command runs.
func TestMCPStdioLocal(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	ws := sandboxtest.TempDir(t)
	cs, logs := mcpStdio(t, []string{"SAGE_SANDBOX_MODE="}, "--workspace", ws, "--approve-all")
	text, code := callTool(t, cs, "execute_shell_command", map[string]any{"command": "pwd; chmod 600 f 2>/dev/null; touch f; chmod 600 f && echo chmod-ran"})
	require.Empty(t, code, "%s\nlog:\n%s", text, logs.String())
	assert.Contains(t, text, "/workspace\n", "the command runs inside the sandbox's /workspace")
	assert.Contains(t, text, "chmod-ran", "--approve-all runs what the policy asks about")
	_, err := os.Stat(filepath.Join(ws, "f"))
	assert.NoError(t, err)
	assert.Contains(t, logs.String(), "sandbox local")
}

func TestMCPUsageErrors(t *testing.T) {
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "mcp", "extra")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, `unexpected argument "extra"`)
	r = sage(t, home, "", "mcp", "--policy", filepath.Join(home, "missing.yaml"))
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--policy")
	assert.Empty(t, r.stdout, "stdout carries only MCP messages")
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSandboxdServesMCP: /mcp speaks streamable HTTP behind sandboxd's
// token.
func TestSandboxdServesMCP(t *testing.T) {
	url, logs := startSandboxdLogs(t, sandboxtest.TempDir(t), "--mode", "passthrough", "--workspace", sandboxtest.TempDir(t),
		"--token", "s3cret-token")
	endpoint := url + "/mcp"
	var err error

	connect := func(rt http.RoundTripper) (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "sage-test", Version: "1"}, nil)
		return client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: rt, Timeout: time.Minute}}, nil)
	}
	for _, rt := range []http.RoundTripper{http.DefaultTransport, bearer{"wrong-token"}} {
		cs, err := connect(rt)
		if cs != nil {
			cs.Close()
		}
		require.Error(t, err, "a client without the token is refused")
		assert.Contains(t, err.Error(), "Unauthorized")
	}
	var cs *mcp.ClientSession
	require.Eventually(t, func() bool {
		cs, err = connect(bearer{"s3cret-token"})
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "with the token: %v\nlog:\n%s", err, logs.String())
	defer cs.Close()
	assert.Equal(t, builtinNames(), listedNames(t, cs))
	text, code := callTool(t, cs, "file_write", map[string]any{"path": "m.txt", "content": "via mcp"})
	require.Empty(t, code, text)
	text, code = callTool(t, cs, "execute_shell_command", map[string]any{"command": "cat m.txt"})
	require.Empty(t, code, text)
	assert.Contains(t, text, "via mcp")
	_, code = callTool(t, cs, "execute_shell_command", map[string]any{"command": "sudo id"})
	assert.Equal(t, tools.CodePolicyDenied, code)
}
