//go:build linux

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

// TestSessionUnderGvisor: `sage exec --isolation gvisor --session S` run
// twice reaches the same gVisor session sandbox through its daemon (the
// second command line sees the first one's /tmp, on gVisor's kernel), and
// `sage session stop` ends it.
func TestSessionUnderGvisor(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (isolation gvisor runs runsc as root)", "run the tests as root")
	}
	testenv.Command(t, "runsc", testenv.SetupFix+" (.ci/setup.d/50-runsc.sh builds runsc)")
	home := sessionHome(t)
	r := inSession(t, home, "gv", "", "echo kept > /tmp/f; cat /proc/version", "--isolation", "gvisor")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, strings.ToLower(r.stdout), "gvisor")
	r = inSession(t, home, "gv", "", "cat /tmp/f", "--isolation", "gvisor")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "kept\n", r.stdout, "the second command line runs in the same gVisor session")
	rows := sessionLsJSON(t, home)
	require.Len(t, rows, 1)
	assert.Equal(t, "gv", rows[0].Session)
	r = sage(t, home, "", "session", "stop", "gv")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, sessionLsJSON(t, home))
}
