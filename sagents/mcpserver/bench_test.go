package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sage-go/sage/internal/benchpair"
)

// The MCP overhead of one call: the same tool call through the Manager
// directly (the baseline) and through an SDK client over the in-memory
// transport. make bench checks BenchmarkMCPFileReadPaired's ratio.

func benchFixture(b *testing.B) *fixture {
	b.Helper()
	f := start(b, nil)
	if err := os.WriteFile(filepath.Join(f.ws, "b.txt"), []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return f
}

// directRead and mcpRead are one file_read call through the Manager and
// through the MCP client.
func directRead(b *testing.B, f *fixture) func() {
	args := json.RawMessage(`{"path":"b.txt"}`)
	return func() {
		if _, err := f.tm.Run(context.Background(), "file_read", args); err != nil {
			b.Fatal(err)
		}
	}
}

func mcpRead(b *testing.B, f *fixture) func() {
	p := &mcp.CallToolParams{Name: "file_read", Arguments: map[string]any{"path": "b.txt"}}
	return func() {
		res, err := f.cs.CallTool(context.Background(), p)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

func BenchmarkDirectFileRead(b *testing.B) {
	read := directRead(b, benchFixture(b))
	for b.Loop() {
		read()
	}
}

func BenchmarkMCPFileRead(b *testing.B) {
	read := mcpRead(b, benchFixture(b))
	for b.Loop() {
		read()
	}
}

// BenchmarkMCPFileReadPaired alternates both in one loop; x-baseline is
// the MCP call's median over the direct call's.
func BenchmarkMCPFileReadPaired(b *testing.B) {
	f := benchFixture(b)
	benchpair.Run(b, directRead(b, f), mcpRead(b, f))
}
