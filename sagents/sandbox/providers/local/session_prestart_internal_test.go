//go:build linux

package local

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
)

// TestSessionPing: a running supervisor answers a ping; a stopped one
// makes ping fail instead of hang.
func TestSessionPing(t *testing.T) {
	rtSession = true
	defer func() { rtSession = false }()
	s := rtSandbox(t, nil)
	rtRun(t, s, "true", sandbox.ExecOptions{})
	s.sess.mu.Lock()
	l := s.sess.live
	s.sess.mu.Unlock()
	require.NotNil(t, l)
	require.NoError(t, l.ping())
	s.dropSession()
	assert.Error(t, l.ping(), "ping of a stopped session sandbox")
}
