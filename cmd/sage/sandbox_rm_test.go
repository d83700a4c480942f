package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Issue 15, fault 6: `sage sandbox rm` of a thread that never existed is
// an error, not "released"; a known thread's files are named, and
// deleted with --purge. Needs a Docker Engine (the default backend asks
// it whether the thread's sandbox runs); nothing is created.
func TestSandboxRmUnknownAndPurge(t *testing.T) {
	home := sandboxtest.TempDir(t)
	t.Setenv("SAGE_AIO_CONTAINER_PREFIX", "sagetest-rm")
	r := sage(t, home, "", "sandbox", "rm", "nope")
	assert.Equal(t, 1, r.code, "an unknown name exits 1, as sage session stop of one")
	assert.NotContains(t, r.stdout, "released")
	assert.Equal(t, "sage sandbox rm: no sandbox, state or files for thread nope ('sage sandbox ls' lists them)\n", r.stderr,
		"one line, the prefix once")

	dir := filepath.Join(home, "threads", "known", "user-data", "outputs")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	r = sage(t, home, "", "sandbox", "rm", "known")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "its files stay in "+filepath.Join(home, "threads", "known"))
	assert.DirExists(t, dir)
	r = sage(t, home, "", "sandbox", "rm", "--purge", "known")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NoDirExists(t, filepath.Join(home, "threads", "known"))
}
