package mcpserver_test

import (
	"bufio"
	"context"
	"errors"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/mcpserver"
)

// FuzzResourcePath: a resource URI comes from the host; whatever it is,
// an accepted one names a path inside the workspace, and a refused one
// says why with fs.ErrPermission or fs.ErrInvalid.
func FuzzResourcePath(f *testing.F) {
	for _, s := range []string{"file:///workspace/a.txt", "file:///workspace/../etc/passwd", "file:///workspace/%2e%2e/x",
		"file://localhost/workspace/d/e", "file:///workspace", "file:///workspace/", "http://x/workspace/a", "file:///workspacex/a",
		"file:///workspace/a/./b", "file:///workspace//a", "file:///workspace/a%00b", "file:///workspace/a?b#c", ":%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		rel, err := mcpserver.ResourcePath("/workspace", uri)
		if err != nil {
			if !errors.Is(err, fs.ErrPermission) && !errors.Is(err, fs.ErrInvalid) {
				t.Fatalf("%q: error %v is neither fs.ErrPermission nor fs.ErrInvalid", uri, err)
			}
			return
		}
		full := path.Join("/workspace", rel)
		if !fs.ValidPath(rel) || rel == "." || !strings.HasPrefix(full, "/workspace/") || full != "/workspace/"+rel {
			t.Fatalf("%q: accepted as %q, which is not a clean path inside the workspace", uri, rel)
		}
	})
}

func TestResourcePath(t *testing.T) {
	for uri, want := range map[string]string{
		"file:///workspace/a.txt": "a.txt", "file://localhost/workspace/d/e": "d/e", "file:///workspace/sp%20ace": "sp ace",
		"file:///workspace/../etc/passwd": "", "file:///workspace/%2e%2e/x": "", "file:///workspacex/a": "",
		"http://x/workspace/a": "", "file://evil/workspace/a": "", "file:///workspace/": "", "file:///workspace/a//b": "",
	} {
		got, err := mcpserver.ResourcePath("/workspace/", uri)
		if want == "" {
			if !errors.Is(err, fs.ErrPermission) {
				t.Errorf("%s: got %q, %v; want fs.ErrPermission", uri, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", uri, got, err, want)
		}
	}
}

// FuzzStdioLine: whatever line a host sends, the stdio transport either
// hands a message to the server or answers the line with a JSON-RPC error,
// and never stops reading.
func FuzzStdioLine(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1`, `[]`, `[{}]`, `null`, `"x"`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, `{"jsonrpc":"2.0","id":2,"params":{}}`, "\x00\xff", `{"id":null,"result":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\r\n") {
			t.Skip("one line")
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		conn, err := (&mcpserver.StdioTransport{Reader: inR, Writer: outW, MaxLineBytes: 1024}).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		go func() {
			_, _ = io.WriteString(inW, line+"\n"+`{"jsonrpc":"2.0","id":"next","method":"ping"}`+"\n")
		}()
		out := make(chan string, 4)
		go func() {
			sc := bufio.NewScanner(outR)
			for sc.Scan() {
				out <- sc.Text()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("the transport stopped reading after %q: %v", line, err)
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.ID.Raw() == "next" {
				return // the line did not end the session
			}
		}
	})
}
