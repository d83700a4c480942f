//go:build linux

package local

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionLogIsBounded: what a session sandbox writes reaches
// session.log through a pipe, up to maxSessionLog bytes and a line that
// says the rest was dropped; the writer is never blocked (the rest is
// read and dropped), and the last line is the log's tail.
func TestSessionLogIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.log")
	require.NoError(t, os.WriteFile(path, []byte("an earlier session's line\n"), 0o600))
	l, err := openSessionLog(path)
	require.NoError(t, err)
	fi, err := l.w.Stat()
	require.NoError(t, err)
	assert.True(t, fi.Mode()&os.ModeNamedPipe != 0, "the sandbox's stderr is a pipe, not the file")
	l.start()
	wrote := make(chan error, 1)
	go func() {
		_, err := l.w.Write(bytes.Repeat([]byte("x"), maxSessionLog+512<<10))
		if err == nil {
			_, err = l.w.WriteString("\nlast words\n")
		}
		l.w.Close()
		wrote <- err
	}()
	select {
	case err := <-wrote:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the writer blocked past the limit")
	}
	assert.Contains(t, l.tail(), "the rest is dropped", "past the limit nothing more is logged: the last line is the notice")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), len("an earlier session's line\n")+maxSessionLog+200)
	assert.Contains(t, string(b), "the rest is dropped")
	assert.NotContains(t, string(b), "last words")
}
