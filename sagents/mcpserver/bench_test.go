package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP overhead of one call: the same tool call through the Manager
// directly (the baseline) and through an SDK client over the in-memory
// transport. make bench prints the ratio.

func benchFixture(b *testing.B) *fixture {
	b.Helper()
	f := start(b, nil)
	if err := os.WriteFile(filepath.Join(f.ws, "b.txt"), []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return f
}

func BenchmarkDirectFileRead(b *testing.B) {
	f := benchFixture(b)
	args := json.RawMessage(`{"path":"b.txt"}`)
	for b.Loop() {
		if _, err := f.tm.Run(context.Background(), "file_read", args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMCPFileRead(b *testing.B) {
	f := benchFixture(b)
	p := &mcp.CallToolParams{Name: "file_read", Arguments: map[string]any{"path": "b.txt"}}
	for b.Loop() {
		res, err := f.cs.CallTool(context.Background(), p)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
