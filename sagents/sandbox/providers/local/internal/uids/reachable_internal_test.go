//go:build linux

package uids

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// reachableWithin runs reachable, failing the test when it does not
// return within a deadline (it looped forever on a relative path, whose
// filepath.Dir stays ".").
func reachableWithin(t *testing.T, p string, id *Identity, need uint32) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Reachable(p, id, need) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Reachable(%q) did not return within 10s", p)
		return nil
	}
}

func TestReachableRelativePathEnds(t *testing.T) {
	dir := sandboxtest.TempDir(t)
	t.Chdir(dir)
	require.NoError(t, os.MkdirAll("rel/open", 0o755))
	require.NoError(t, os.Mkdir("rel/closed", 0o700))
	id := &Identity{UID: 2000012345, GID: 2000012345}
	assert.NoError(t, reachableWithin(t, "rel/open", id, NeedExec))
	assert.NoError(t, reachableWithin(t, ".", id, NeedExec))
	err := reachableWithin(t, "rel/closed/x", id, NeedExec)
	require.ErrorIs(t, err, fs.ErrPermission, "control: a closed directory on a relative path is found")
	assert.ErrorContains(t, err, filepath.Join(dir, "rel/closed")+" (mode 700")
}

func TestReachFixNamesTheClosedDirectory(t *testing.T) {
	home := sandboxtest.TempDir(t)
	t.Setenv("SAGE_HOME", home)
	closed := &closedError{dir: home + "/sessions", mode: 0o700, UID: 2000012345}
	ws := home + "/sessions/s/workspace"
	assert.Equal(t, "fix: chmod o+x "+home+"/sessions", ReachFix(ws, closed),
		"a workspace under SAGE_HOME is not told to move under SAGE_HOME")
	closed.dir = "/srv"
	assert.Equal(t, "fix: chmod o+x /srv, or put the workspace under SAGE_HOME ("+home+")", ReachFix("/srv/ws", closed))
	closed.dir = "/srv/ws"
	assert.Contains(t, ReachFix("/srv/ws", closed), "fix: chown 2000012345 /srv/ws")
}
