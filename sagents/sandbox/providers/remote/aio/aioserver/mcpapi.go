package aioserver

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"sort"
)

// mcpServers is GET /v1/mcp/servers: the names of the MCP servers.
func (s *Server) mcpServers(w http.ResponseWriter, _ *http.Request) {
	names := make([]string, 0, len(s.opts.MCPServers))
	for n := range s.opts.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	ok(w, names)
}

func (s *Server) toolServer(w http.ResponseWriter, r *http.Request) (ToolServer, bool) {
	name := r.PathValue("server")
	ts, found := s.opts.MCPServers[name]
	if !found {
		envelopeError(w, http.StatusNotFound, "no MCP server "+name, nil, "GET /v1/mcp/servers lists them")
		return nil, false
	}
	return ts, true
}

// mcpTools is GET /v1/mcp/{server}/tools: the server's ListToolsResult.
func (s *Server) mcpTools(w http.ResponseWriter, r *http.Request) {
	ts, found := s.toolServer(w, r)
	if !found {
		return
	}
	res, err := ts.ListTools(r.Context())
	if err != nil {
		envelopeError(w, http.StatusInternalServerError, err.Error(), nil, "")
		return
	}
	ok(w, json.RawMessage(res))
}

// mcpCall is POST /v1/mcp/{server}/tools/{tool}: the body is the tool's
// arguments (an object; empty means none); the answer is its
// CallToolResult, a failed tool call included (isError true). The body
// must be application/json, as every POST's (a browser cannot send that
// cross-site without asking).
func (s *Server) mcpCall(w http.ResponseWriter, r *http.Request) {
	ts, found := s.toolServer(w, r)
	if !found {
		return
	}
	var obj map[string]json.RawMessage // the arguments, an object (decode's checks: JSON only)
	if !s.decode(w, r, &obj) {
		return
	}
	args, err := json.Marshal(obj)
	if err != nil {
		s.fail(w, err)
		return
	}
	res, err := ts.CallTool(r.Context(), r.PathValue("tool"), args)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		envelopeError(w, http.StatusNotFound, err.Error(), nil, "GET /v1/mcp/{server}/tools lists the tools")
	case err != nil:
		envelopeError(w, http.StatusInternalServerError, err.Error(), nil, "")
	default:
		ok(w, json.RawMessage(res))
	}
}
