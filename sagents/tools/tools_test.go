package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
	"github.com/sage-go/sage/sagents/tools"
)

// modes returns a fresh sandbox per mode: passthrough always, local when
// bwrap is installed (it must be unless SAGE_TEST_ALLOW_SKIP=1).
func modes(t *testing.T) map[string]func(t *testing.T) *sandbox.Sandbox {
	return map[string]func(t *testing.T) *sandbox.Sandbox{
		"passthrough": func(t *testing.T) *sandbox.Sandbox { return open(t, sandbox.Passthrough) },
		"local": func(t *testing.T) *sandbox.Sandbox {
			testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
			return open(t, sandbox.Local)
		},
	}
}

func open(t *testing.T, mode sandbox.Type) *sandbox.Sandbox {
	t.Helper()
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: mode, Workspace: sandboxtest.TempDir(t), RuntimeDir: sandboxtest.TempDir(t)})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func manager(t *testing.T, h *sandbox.Sandbox, opts tools.Options) *tools.Manager {
	t.Helper()
	m := tools.NewManager(h, opts)
	require.NoError(t, m.RegisterBuiltins(tools.BuiltinOptions{}))
	return m
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

type toolCase struct {
	name  string
	setup map[string][]byte // workspace files written first
	tool  string
	args  string
	code  string   // expected error code, "" for success
	want  []string // substrings of the text
}

func TestToolsInEveryMode(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 10000) // 170 KB
	cases := []toolCase{
		{name: "read", setup: map[string][]byte{"a.txt": []byte("one\ntwo\nthree\n")}, tool: "file_read",
			args: `{"path":"a.txt","start_line":2,"end_line":3,"line_numbers":true}`, want: []string{"lines 2-3 of 3", "     2\ttwo", "     3\tthree"}},
		{name: "read missing", tool: "file_read", args: `{"path":"nope.txt"}`, code: tools.CodeNotFound},
		{name: "read binary", setup: map[string][]byte{"b.bin": {0x7f, 'E', 'L', 'F', 0, 1, 2}}, tool: "file_read", args: `{"path":"b.bin"}`, code: tools.CodeBinaryFile},
		{name: "read non-utf8", setup: map[string][]byte{"l1.txt": []byte("caf\xe9\n")}, tool: "file_read", args: `{"path":"l1.txt"}`, want: []string{"not valid UTF-8", "caf\uFFFD"}},
		{name: "read directory", setup: map[string][]byte{"d/x": []byte("x")}, tool: "file_read", args: `{"path":"d"}`, code: tools.CodeIsDirectory},
		{name: "read outside", tool: "file_read", args: `{"path":"../../../../etc/shadow"}`, code: tools.CodePermission},
		{name: "read huge is bounded", setup: map[string][]byte{"big.txt": []byte(big)}, tool: "file_read", args: `{"path":"big.txt"}`,
			want: []string{"cut from the middle", "full output: .sage/tool-output/file_read-"}},
		{name: "bad args: missing required", tool: "file_read", args: `{}`, code: tools.CodeInvalidArguments, want: []string{"path"}},
		{name: "bad args: wrong type", tool: "file_read", args: `{"path":3}`, code: tools.CodeInvalidArguments},
		{name: "bad args: unknown field", tool: "file_read", args: `{"path":"a","bogus":1}`, code: tools.CodeInvalidArguments},
		{name: "bad args: not json", tool: "file_write", args: `{"path":`, code: tools.CodeInvalidArguments},
		{name: "bad args: enum", tool: "file_write", args: `{"path":"a","content":"x","mode":"truncate"}`, code: tools.CodeInvalidArguments},
		{name: "unknown tool", tool: "rm_rf", args: `{}`, code: tools.CodeUnknownTool},
		{name: "write", tool: "file_write", args: `{"path":"new/dir/f.txt","content":"hi\n"}`, want: []string{"wrote 3 bytes (1 lines) to new/dir/f.txt"}},
		{name: "grep", setup: map[string][]byte{"src/a.py": []byte("import os\nprint(1)\n"), "src/b.go": []byte("package b\n"), "bin.dat": {0, 'p', 'r', 'i', 'n', 't'}},
			tool: "grep", args: `{"pattern":"print|package"}`, want: []string{"src/a.py:2: print(1)", "src/b.go:1: package b", "1 binary"}},
		{name: "grep glob", setup: map[string][]byte{"src/a.py": []byte("print(1)\n"), "src/b.go": []byte("print\n")},
			tool: "grep", args: `{"pattern":"print","glob":"*.py"}`, want: []string{"1 matching lines", "src/a.py:1"}},
		{name: "grep bad regex", tool: "grep", args: `{"pattern":"("}`, code: tools.CodeInvalidPattern},
		{name: "grep max results", setup: map[string][]byte{"m.txt": []byte(strings.Repeat("x\n", 50))},
			tool: "grep", args: `{"pattern":"x","max_results":5}`, want: []string{"5 matching lines", "stopped at max_results=5"}},
		{name: "glob", setup: map[string][]byte{"a/b/c.py": nil, "a/d.py": nil, "e.txt": nil, "it's $(x).py": nil},
			tool: "glob", args: `{"pattern":"**/*.py"}`, want: []string{"3 files match", "a/b/c.py", "a/d.py", "it's $(x).py"}},
		{name: "glob prefix", setup: map[string][]byte{"a/b/c.py": nil, "a/d.py": nil}, tool: "glob", args: `{"pattern":"a/*.py"}`, want: []string{"1 files match", "a/d.py"}},
		{name: "list_dir", setup: map[string][]byte{"x/y.txt": []byte("12345")}, tool: "list_dir", args: `{"depth":3}`, want: []string{"x/", "y.txt  (5 bytes)"}},
		{name: "list_dir missing", tool: "list_dir", args: `{"path":"nope"}`, code: tools.CodeNotFound},
		{name: "shell", tool: "execute_shell_command", args: `{"command":"echo out; echo err >&2; exit 3"}`, want: []string{"status: completed", "exit_code: 3", "out\n", "err\n"}},
		{name: "shell env and workdir", setup: map[string][]byte{"sub/.keep": nil}, tool: "execute_shell_command",
			args: `{"command":"echo $GREETING; pwd","workdir":"sub","env":{"GREETING":"hello"}}`, want: []string{"hello", "/sub"}},
		{name: "shell huge output", tool: "execute_shell_command", args: `{"command":"seq 1 200000"}`,
			want: []string{"exit_code: 0", "\n1\n2\n", "200000\n", "cut from the middle", ".sage/tool-output/execute_shell_command-"}},
		{name: "shell policy deny", tool: "execute_shell_command", args: `{"command":"sudo ls"}`, code: tools.CodePolicyDenied},
		{name: "shell policy ask denied by default", tool: "execute_shell_command", args: `{"command":"git push origin main"}`, code: tools.CodeNotApproved},
		{name: "await unknown task", tool: "await_shell", args: `{"task_id":"bg-nope"}`, code: tools.CodeUnknownTask},
		{name: "python", tool: "execute_python", args: `{"code":"import sys\nprint(6*7)\nprint('e', file=sys.stderr)"}`, want: []string{"exit_code: 0", "42", "stderr:\ne"}},
	}
	for mode, newH := range modes(t) {
		t.Run(mode, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					h := newH(t)
					for p, b := range tc.setup {
						require.NoError(t, h.WriteFile(ctx(t), p, b, sandbox.WriteOptions{}))
					}
					m := manager(t, h, tools.Options{})
					text, err := m.Run(ctx(t), tc.tool, json.RawMessage(tc.args))
					if tc.code != "" {
						require.Error(t, err, text)
						var te *tools.Error
						require.ErrorAs(t, err, &te)
						require.Equal(t, tc.code, te.Code, text)
						var out map[string]any
						require.NoError(t, json.Unmarshal([]byte(text), &out), text)
						require.Equal(t, false, out["success"])
						require.Equal(t, tc.code, out["error_code"])
						require.NotEmpty(t, out["message"])
					} else {
						require.NoError(t, err, text)
					}
					for _, w := range tc.want {
						require.Contains(t, text, w)
					}
					require.LessOrEqual(t, len(text), tools.DefaultMaxResultTokens*tools.BytesPerToken+500)
				})
			}
		})
	}
}

func TestShellLifecycle(t *testing.T) {
	for mode, newH := range modes(t) {
		t.Run(mode, func(t *testing.T) {
			h := newH(t)
			m := manager(t, h, tools.Options{})
			c := ctx(t)
			text, err := m.Run(c, "execute_shell_command", json.RawMessage(`{"command":"echo started; sleep 1; echo ready; sleep 30","block_until_ms":100}`))
			require.NoError(t, err)
			require.Contains(t, text, "status: running")
			require.Contains(t, text, "await_shell")
			id := field(t, text, "task_id")

			text, err = m.Run(c, "await_shell", json.RawMessage(`{"task_id":"`+id+`","pattern":"rea+dy","block_until_ms":20000}`))
			require.NoError(t, err)
			require.Contains(t, text, "status: running")
			require.Contains(t, text, "pattern matched: ready")

			start := time.Now()
			text, err = m.Run(c, "kill_shell", json.RawMessage(`{"task_id":"`+id+`"}`))
			require.NoError(t, err)
			require.Contains(t, text, "status: killed")
			require.Contains(t, text, "started\nready\n")
			require.Less(t, time.Since(start), 15*time.Second)

			text, err = m.Run(c, "await_shell", json.RawMessage(`{"task_id":"`+id+`","block_until_ms":10}`))
			require.NoError(t, err)
			require.Contains(t, text, "status: completed")

			// A task that finishes while awaited.
			text, err = m.Run(c, "execute_shell_command", json.RawMessage(`{"command":"sleep 0.3; echo done","block_until_ms":0}`))
			require.NoError(t, err)
			id = field(t, text, "task_id")
			text, err = m.Run(c, "await_shell", json.RawMessage(`{"task_id":"`+id+`","block_until_ms":20000}`))
			require.NoError(t, err)
			require.Contains(t, text, "status: completed")
			require.Contains(t, text, "exit_code: 0")
			require.Contains(t, text, "done")
		})
	}
}

func field(t *testing.T, text, name string) string {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return v
		}
	}
	t.Fatalf("no %s in %q", name, text)
	return ""
}

// TestSpecs: the specs an adapter builds its framework's tools from are
// the definitions' name, description and schema, in the same order, and
// RegisterBuiltins registered every built-in (a second call is the
// duplicate-name error, and registers nothing).
func TestSpecs(t *testing.T) {
	m := manager(t, open(t, sandbox.Passthrough), tools.Options{})
	specs, defs := m.Specs(), m.Definitions()
	require.Len(t, specs, len(tools.Builtins(tools.BuiltinOptions{})))
	require.Len(t, defs, len(specs))
	for i, s := range specs {
		assert.Equal(t, defs[i].Function.Name, s.Name)
		assert.Equal(t, defs[i].Function.Description, s.Description)
		assert.Equal(t, defs[i].Function.Parameters, s.Parameters)
	}
	require.ErrorContains(t, m.RegisterBuiltins(tools.BuiltinOptions{}), "already registered")
	assert.Len(t, m.Specs(), len(specs))
}

func TestDefinitions(t *testing.T) {
	m := manager(t, open(t, sandbox.Passthrough), tools.Options{})
	defs := m.Definitions()
	var names []string
	for _, d := range defs {
		names = append(names, d.Function.Name)
		var s map[string]any
		require.NoError(t, json.Unmarshal(d.Function.Parameters.(json.RawMessage), &s))
		require.Equal(t, "object", s["type"], d.Function.Name)
		require.Equal(t, false, s["additionalProperties"], d.Function.Name)
		require.NotContains(t, s, "$ref")
		require.NotEmpty(t, d.Function.Description)
	}
	require.Equal(t, []string{"await_shell", "execute_python", "execute_shell_command", "file_read", "file_update",
		"file_write", "glob", "grep", "kill_shell", "list_dir"}, names)
	require.Error(t, m.Register(tools.PythonTool()), "duplicate")
}

func TestBound(t *testing.T) {
	text := strings.Repeat("line\n", 1000)
	out := tools.Bound(text, 400, "/w/full.txt")
	require.Less(t, len(out), 600)
	require.True(t, strings.HasPrefix(out, "line\n"))
	require.True(t, strings.HasSuffix(out, "line\n"))
	require.Contains(t, out, "lines ")
	require.Contains(t, out, "full output: /w/full.txt")
	require.Equal(t, "short", tools.Bound("short", 400, ""))
	// UTF-8 is never split.
	u := strings.Repeat("é", 1000)
	require.True(t, json.Valid([]byte(`"`+strings.ReplaceAll(tools.Bound(u, 101, ""), "\n", `\n`)+`"`)))
}
