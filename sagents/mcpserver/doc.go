// Package mcpserver serves the tools of a [tools.Manager] over the Model
// Context Protocol (github.com/modelcontextprotocol/go-sdk), so that MCP
// hosts (Claude Code, Cursor, Codex, Goose, agent frameworks) can use one
// sandbox session.
//
// Its API: [New] with [Options] (and [Files] for resources) returns a
// [Server], run over a transport ([Server.Run], [StdioTransport]) or served
// over HTTP ([Server.Handler]); the Default* constants are the Options'
// defaults.
//
// Every registered tool is listed under its own name with its own JSON
// Schema, and every call goes through [tools.Manager.Do]: the same argument
// validation, command Policy, observability events and result bounds as
// for sage's own agent. A failed call is a tool result with isError set,
// whose text (and structured content) is the tool's structured error,
// {"success":false,"error_code":...,"message":...,"hint":...}.
//
// While execute_shell_command or await_shell waits, output that arrives is
// sent as progress notifications when the host asked for them (a progress
// token). A call the host cancels cancels its context; a command started
// by a cancelled execute_shell_command is killed.
//
// With Options.Files set, the workspace's files are resources: file://
// URIs under the workspace, listed (read-only, bounded by MaxResources) and
// read (bounded by MaxResourceBytes). A URI outside the workspace is
// refused with an error that wraps fs.ErrPermission.
//
// [Server.Run] serves one client over a transport ([StdioTransport] for
// `sage mcp`: a malformed line is answered -32700 and the session goes on,
// and a call the host cancelled gets no response, as the specification
// asks); [Server.Handler] serves the streamable HTTP transport (`sage
// sandboxd` mounts it at /mcp behind its token): a request without
// Mcp-Session-Id other than initialize is HTTP 400, an unknown method is
// -32601. A missing resource is -32002 in the protocol versions up to
// 2025-11-25 that define that code, -32602 in later ones.
package mcpserver
