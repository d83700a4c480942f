package aioserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/mcpserver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
	"github.com/sage-go/sage/sagents/tools"
)

// The SDKs' mcp client: list_mcp_servers(), list_mcp_tools(server) and
// execute_mcp_tool(server, tool, arguments) (the old server answered 404:
// MCP was only at /mcp). sandboxd's own MCP server is "sage", its tools
// those of /mcp; every answer goes through the OpenAPI validator.
func TestMCPEndpoints_SDKMcp(t *testing.T) {
	var srv *mcpserver.Server
	f := newFixture(t, func(o *aioserver.Options) {
		tm := tools.NewManager(o.Handle, tools.Options{})
		require.NoError(t, tm.Register(tools.Builtins(tools.BuiltinOptions{})...))
		var err error
		srv, err = mcpserver.New(tm, mcpserver.Options{})
		require.NoError(t, err)
		o.MCPServers = map[string]aioserver.ToolServer{"sage": srv}
	})
	t.Cleanup(func() { srv.Close() })
	st, m := f.do(http.MethodGet, "/v1/mcp/servers", "", nil)
	require.Equal(t, http.StatusOK, st, "%v", m)
	assert.Equal(t, []any{"sage"}, m["data"])

	st, m = f.do(http.MethodGet, "/v1/mcp/sage/tools", "", nil)
	require.Equal(t, http.StatusOK, st, "%v", m)
	var names []string
	for _, tool := range data(t, m)["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	assert.Contains(t, names, "execute_shell_command")
	assert.Contains(t, names, "file_read")

	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "hello.txt"), []byte("hi from the workspace\n"), 0o644))
	st, m = f.post("/v1/mcp/sage/tools/file_read", `{"path":"hello.txt"}`)
	require.Equal(t, http.StatusOK, st, "%v", m)
	d := data(t, m)
	assert.NotEqual(t, true, d["isError"])
	text := d["content"].([]any)[0].(map[string]any)["text"].(string)
	assert.Contains(t, text, "hi from the workspace")

	st, m = f.post("/v1/mcp/sage/tools/file_read", `{"path":"nope.txt"}`)
	require.Equal(t, http.StatusOK, st, "a failed tool call is a result: %v", m)
	assert.Equal(t, true, data(t, m)["isError"])

	st, _ = f.post("/v1/mcp/sage/tools/no_such_tool", `{}`)
	assert.Equal(t, http.StatusNotFound, st)
	st, _ = f.do(http.MethodGet, "/v1/mcp/other/tools", "", nil)
	assert.Equal(t, http.StatusNotFound, st)
	st, body := f.raw(http.MethodPost, "/v1/mcp/sage/tools/file_write", `{"path":"pwned.txt","content":"x"}`,
		map[string]string{"Content-Type": "text/plain"})
	assert.Equal(t, http.StatusUnsupportedMediaType, st, "a browser's text/plain POST runs no tool: %s", body)
	_, err := os.Stat(filepath.Join(f.ws, "pwned.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	// Control: without MCP servers the list is empty.
	g := newFixture(t, nil)
	st, m = g.do(http.MethodGet, "/v1/mcp/servers", "", nil)
	require.Equal(t, http.StatusOK, st)
	assert.Empty(t, m["data"])
}
