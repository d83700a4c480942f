package aioserver_test

import (
	"bufio"
	"errors"
	"io"
	"testing"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
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
		var exec aio.BashExecRequest
		if err := aioserver.DecodeJSON(body, &exec, "command"); err == nil && !hasField(body, "command") {
			t.Fatalf("accepted %q without command", body)
		}
		var write aio.FileWriteRequest
		_ = aioserver.DecodeJSON(body, &write, "file", "content")
		var list aio.FileListRequest
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
