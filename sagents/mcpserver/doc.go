// Package mcpserver serves the tools of a [tools.Manager] over the Model
// Context Protocol (github.com/modelcontextprotocol/go-sdk), so that MCP
// hosts (Claude Code, Cursor, Codex, Goose, agent frameworks) can use one
// sandbox session.
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
// [Server.Run] serves one client over a transport (mcp.StdioTransport for
// `sage mcp`); [Server.Handler] serves the streamable HTTP transport
// (`sage sandboxd` mounts it at /mcp behind its token).
package mcpserver
