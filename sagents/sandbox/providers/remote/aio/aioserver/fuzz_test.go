package aioserver_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioserver"
)

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// FuzzDecodeJSON feeds arbitrary bodies to the server's request decoder:
// it must never panic, and a body it accepts has every required field.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{}`, `null`, `[]`, `{"command":null}`, `{"command":5}`,
		`{"file":"a","content":"b","encoding":"base64"}`, `{"env":{"A":"B"},"command":"x","hard_timeout":1e308}`, `{"a":`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var exec aioapi.BashExecRequest
		if err := aioserver.DecodeJSON(body, &exec, "command"); err == nil && !hasField(body, "command") {
			t.Fatalf("accepted %q without command", body)
		}
		var write aioapi.FileWriteRequest
		_ = aioserver.DecodeJSON(body, &write, "file", "content")
		var list aioapi.FileListRequest
		err := aioserver.DecodeJSON(body, &list, "path")
		if err != nil && err.Error() == "" {
			t.Fatal("empty error message")
		}
		var re interface{ Error() string }
		_ = errors.As(err, &re)
	})
}

func hasField(body []byte, name string) bool {
	var m map[string]any
	return aioDecode(body, &m) == nil && m[name] != nil
}

// FuzzHostAndOrigin sends arbitrary Host and Origin headers: nothing but
// a loopback Host is served (421 otherwise), and a foreign Origin is
// refused (403).
func FuzzHostAndOrigin(f *testing.F) {
	for _, s := range [][2]string{{"127.0.0.1:8080", ""}, {"localhost", "http://localhost"}, {"[::1]:1", "null"},
		{"evil.example:8080", ""}, {"127.0.0.1.evil", ""}, {"[::1", ""}, {"", ""}, {"LOCALHOST:1", "http://LOCALHOST:1"}} {
		f.Add(s[0], s[1])
	}
	f.Setenv("SAGE_HOME", f.TempDir())
	h, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Passthrough, Workspace: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	defer h.Close(context.Background())
	srv, err := aioserver.New(aioserver.Options{Handle: h})
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.Ready(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, origin string) {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/sandbox", nil)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		name := host
		if hn, _, err := net.SplitHostPort(host); err == nil {
			name = hn
		}
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
		ip := net.ParseIP(name)
		loopback := strings.EqualFold(name, "localhost") || (ip != nil && ip.IsLoopback())
		switch {
		case !loopback && rec.Code != http.StatusMisdirectedRequest:
			t.Fatalf("Host %q served with %d", host, rec.Code)
		case loopback && origin != "" && !strings.EqualFold(origin, "http://"+host) && rec.Code != http.StatusForbidden:
			t.Fatalf("Host %q Origin %q served with %d", host, origin, rec.Code)
		}
	})
}
