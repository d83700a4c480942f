package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/mcpserver"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// askRule makes any command starting with "needs-approval" an ask.
const askPolicy = `rules:
  - name: test-ask
    match: '^needs-approval'
    decision: ask
    reason: the test asks about it
`

type fixture struct {
	ws  string
	tm  *tools.Manager
	cs  *mcp.ClientSession
	mu  sync.Mutex
	msg []string // progress messages received
}

func (f *fixture) progress() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.msg...)
}

// start serves a passthrough sandbox's tools to an in-process client over
// the SDK's in-memory transport.
func start(t testing.TB, approver tools.Approver) *fixture {
	t.Helper()
	ctx := t.Context()
	parent := sandboxtest.TempDir(t)
	ws := filepath.Join(parent, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	h, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Passthrough, Workspace: ws, RuntimeDir: t.TempDir(), SandboxID: "mcp-test"})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	p, err := tools.ParsePolicy([]byte(askPolicy), h.WorkspacePath())
	require.NoError(t, err)
	tm := tools.NewManager(h, tools.Options{})
	require.NoError(t, tm.Register(tools.Builtins(tools.BuiltinOptions{Shell: tools.ShellOptions{Policy: p, Approver: approver}})...))
	srv, err := mcpserver.New(tm, mcpserver.Options{Files: h})
	require.NoError(t, err)

	f := &fixture{ws: ws, tm: tm}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			f.mu.Lock()
			f.msg = append(f.msg, r.Params.Message)
			f.mu.Unlock()
		}})
	f.cs, err = client.Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { f.cs.Close() })
	return f
}

// call calls a tool and returns its text and, for a failure, its error code.
func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args any) (text, code string) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s: a tool failure is a result, not a protocol error", name)
	return resultText(t, res)
}

func resultText(t *testing.T, res *mcp.CallToolResult) (text, code string) {
	t.Helper()
	require.Len(t, res.Content, 1)
	text = res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		var e struct {
			Success bool   `json:"success"`
			Code    string `json:"error_code"`
			Message string `json:"message"`
		}
		require.NoError(t, json.Unmarshal([]byte(text), &e), text)
		require.False(t, e.Success)
		require.NotEmpty(t, e.Code, text)
		sc, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		assert.JSONEq(t, text, string(sc), "the structured content is the error too")
		return text, e.Code
	}
	return text, ""
}

func TestListToolsSameNamesAndSchemas(t *testing.T) {
	f := start(t, nil)
	res, err := f.cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	got := map[string]string{}
	for _, tl := range res.Tools {
		b, err := json.Marshal(tl.InputSchema)
		require.NoError(t, err)
		got[tl.Name] = string(b)
	}
	defs := f.tm.Definitions()
	require.Len(t, got, len(defs))
	for _, d := range defs {
		want, err := json.Marshal(d.Function.Parameters)
		require.NoError(t, err)
		require.Contains(t, got, d.Function.Name)
		assert.JSONEq(t, string(want), got[d.Function.Name], d.Function.Name)
	}
	assert.Contains(t, got, "execute_shell_command")
	assert.Contains(t, got, "file_read")
}

func TestCallEachTool(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	text, code := call(t, ctx, f.cs, "file_write", map[string]any{"path": "dir/a.txt", "content": "alpha\nbeta\n"})
	require.Empty(t, code, text)
	b, err := os.ReadFile(filepath.Join(f.ws, "dir/a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "alpha\nbeta\n", string(b))

	text, code = call(t, ctx, f.cs, "file_update", map[string]any{"path": "dir/a.txt",
		"operations": []map[string]any{{"type": "replace", "search": "beta", "replace": "gamma"}}})
	require.Empty(t, code, text)
	text, code = call(t, ctx, f.cs, "file_read", map[string]any{"path": "dir/a.txt"})
	require.Empty(t, code, text)
	assert.Contains(t, text, "gamma")
	assert.NotContains(t, text, "beta")

	for name, args := range map[string]map[string]any{
		"list_dir": {"path": "dir"}, "glob": {"pattern": "**/*.txt"}, "grep": {"pattern": "gam+a"},
	} {
		text, code = call(t, ctx, f.cs, name, args)
		require.Empty(t, code, "%s: %s", name, text)
		assert.Contains(t, text, "a.txt", name)
	}
	text, code = call(t, ctx, f.cs, "execute_shell_command", map[string]any{"command": "echo out-$((6*7))"})
	require.Empty(t, code, text)
	assert.Contains(t, text, "out-42")
	assert.Contains(t, text, "status: completed")
	text, code = call(t, ctx, f.cs, "execute_python", map[string]any{"code": "print(6*7)"})
	require.Empty(t, code, text)
	assert.Contains(t, text, "42")
}

func TestFailuresAreStructured(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	_, code := call(t, ctx, f.cs, "file_read", map[string]any{"path": "missing.txt"})
	assert.Equal(t, tools.CodeNotFound, code)
	_, code = call(t, ctx, f.cs, "file_read", map[string]any{"path": 7})
	assert.Equal(t, tools.CodeInvalidArguments, code, "the Manager validates against the schema")
	_, code = call(t, ctx, f.cs, "execute_shell_command", map[string]any{"command": "x", "unknown": 1})
	assert.Equal(t, tools.CodeInvalidArguments, code)
}

// TestTimeoutAndKill: a command longer than block_until_ms comes back
// running with a task id; kill_shell stops it.
func TestTimeoutAndKill(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	text, code := call(t, ctx, f.cs, "execute_shell_command", map[string]any{"command": "echo started; sleep 30", "block_until_ms": 300})
	require.Empty(t, code, text)
	assert.Contains(t, text, "status: running")
	assert.Contains(t, text, "started")
	id := field(text, "task_id")
	require.NotEmpty(t, id, text)
	text, code = call(t, ctx, f.cs, "kill_shell", map[string]any{"task_id": id})
	require.Empty(t, code, text)
	assert.Contains(t, text, "status: killed")
	_, code = call(t, ctx, f.cs, "await_shell", map[string]any{"task_id": "no-such-task"})
	assert.Equal(t, tools.CodeUnknownTask, code)
}

func field(text, name string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return v
		}
	}
	return ""
}

// TestCancelKillsTheCommand: the host cancelling a call stops the
// command; the control lets the same command finish.
func TestCancelKillsTheCommand(t *testing.T) {
	f := start(t, nil)
	cmd := func(marker string) map[string]any {
		return map[string]any{"command": "sleep 1; touch " + marker, "block_until_ms": 20000}
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_shell_command", Arguments: cmd("cancelled")})
	require.Error(t, err, "the cancelled call returns")
	assert.Less(t, time.Since(start), 900*time.Millisecond, "the call returned at the cancel, not at the command's end")

	text, code := call(t, t.Context(), f.cs, "execute_shell_command", cmd("control"))
	require.Empty(t, code, text)
	_, err = os.Stat(filepath.Join(f.ws, "control"))
	require.NoError(t, err, "control: the uncancelled command ends by touching its marker")
	_, err = os.Stat(filepath.Join(f.ws, "cancelled"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the cancelled command was killed before touching its marker")
}

func TestProgressReportsOutputAsItArrives(t *testing.T) {
	f := start(t, nil)
	p := &mcp.CallToolParams{Name: "execute_shell_command",
		Arguments: map[string]any{"command": "echo first-line; sleep 1; echo second-line", "block_until_ms": 20000}}
	p.SetProgressToken("tok-1")
	res, err := f.cs.CallTool(t.Context(), p)
	require.NoError(t, err)
	text, code := resultText(t, res)
	require.Empty(t, code, text)
	got := f.progress()
	assert.Contains(t, strings.Join(got, ""), "first-line", "the first line is reported while the command sleeps")

	// Without a progress token nothing is sent.
	before := len(f.progress())
	text, code = call(t, t.Context(), f.cs, "execute_shell_command", map[string]any{"command": "echo x; sleep 0.5; echo y"})
	require.Empty(t, code, text)
	assert.Len(t, f.progress(), before)
}

func TestPolicyDeniesAndAsks(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	text, code := call(t, ctx, f.cs, "execute_shell_command", map[string]any{"command": "sudo touch owned"})
	assert.Equal(t, tools.CodePolicyDenied, code, text)
	text, code = call(t, ctx, f.cs, "execute_shell_command", map[string]any{"command": "needs-approval; touch asked"})
	assert.Equal(t, tools.CodeNotApproved, code, text)
	_, err := os.Stat(filepath.Join(f.ws, "asked"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a command the policy asks about does not run")

	// Control: with an approver the same command runs.
	g := start(t, tools.ApproveAll{})
	text, code = call(t, ctx, g.cs, "execute_shell_command", map[string]any{"command": "needs-approval; touch asked"})
	require.Empty(t, code, text)
	_, err = os.Stat(filepath.Join(g.ws, "asked"))
	assert.NoError(t, err)
}

// TestEscapeThroughPathsRefused: tool paths and resource URIs that leave
// the workspace are refused; the control reads the same bytes inside.
func TestEscapeThroughPathsRefused(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	const secret = "outside-secret-7731"
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(f.ws), "secret.txt"), []byte(secret), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "inside.txt"), []byte(secret), 0o644))
	require.NoError(t, os.Symlink("../secret.txt", filepath.Join(f.ws, "link.txt")))

	text, code := call(t, ctx, f.cs, "file_read", map[string]any{"path": "inside.txt"})
	require.Empty(t, code, text)
	require.Contains(t, text, secret, "control: the tool reads the secret inside the workspace")
	for _, p := range []string{"../secret.txt", "link.txt", filepath.Join(filepath.Dir(f.ws), "secret.txt")} {
		text, code = call(t, ctx, f.cs, "file_read", map[string]any{"path": p})
		assert.Equal(t, tools.CodePermission, code, "%s: %s", p, text)
		assert.NotContains(t, text, secret, p)
	}

	ws := strings.TrimSuffix(f.ws, "/")
	r, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file://" + ws + "/inside.txt"})
	require.NoError(t, err)
	require.Equal(t, secret, r.Contents[0].Text, "control: the resource inside is read")
	for _, uri := range []string{"file://" + ws + "/../secret.txt", "file://" + ws + "/%2e%2e/secret.txt",
		"file://" + ws + "/link.txt", "file://" + filepath.Dir(ws) + "/secret.txt", "file://evil" + ws + "/inside.txt"} {
		r, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		assert.Error(t, err, uri)
		if r != nil && len(r.Contents) > 0 {
			assert.NotContains(t, r.Contents[0].Text, secret, uri)
		}
	}
}

func TestResourcesListAndRead(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "src", ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "src", "main.py"), []byte("print(1)\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "src", ".git", "HEAD"), []byte("ref\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "bin.dat"), []byte{0, 1, 2, 0xff}, 0o644))
	res, err := f.cs.ListResources(ctx, nil)
	require.NoError(t, err)
	uris := map[string]*mcp.Resource{}
	for _, r := range res.Resources {
		uris[r.URI] = r
	}
	main := "file://" + f.ws + "/src/main.py"
	require.Contains(t, uris, main)
	assert.EqualValues(t, 9, uris[main].Size)
	assert.NotContains(t, uris, "file://"+f.ws+"/src/.git/HEAD", ".git is not listed")
	r, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: main})
	require.NoError(t, err)
	assert.Equal(t, "print(1)\n", r.Contents[0].Text)
	r, err = f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file://" + f.ws + "/bin.dat"})
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 2, 0xff}, r.Contents[0].Blob)
	_, err = f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file://" + f.ws + "/nope.txt"})
	assert.Error(t, err)
}

func TestConcurrentCallsOnOneSession(t *testing.T) {
	f := start(t, nil)
	ctx := t.Context()
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			var args map[string]any
			name := "execute_shell_command"
			want := fmt.Sprintf("call-%d-done", i)
			if i%2 == 0 {
				args = map[string]any{"command": fmt.Sprintf("sleep 0.2; echo call-%d-done", i)}
			} else {
				p := fmt.Sprintf("c/%d.txt", i)
				if _, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_write", Arguments: map[string]any{"path": p, "content": want}}); err != nil {
					errs <- err
					return
				}
				name, args = "file_read", map[string]any{"path": p}
			}
			res, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			switch {
			case err != nil:
				errs <- err
			case res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, want):
				errs <- fmt.Errorf("call %d: %+v", i, res.Content[0])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
