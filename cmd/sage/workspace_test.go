package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Issue 37, item 7, from the command line: the user's existing,
// non-empty project (root's, when the tests run as root, as in CI) is a
// workspace of sage exec, of a session and of sandboxd, and what the
// sandbox writes is the folder owner's afterwards.
func TestUsersProjectIsAWorkspace(t *testing.T) {
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	owner := fmt.Sprintf("%d:%d", os.Geteuid(), os.Getegid())
	ownerOf := func(p string) string {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	ws := sandboxtest.TempDir(t)
	require.NoError(t, os.Chmod(ws, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README"), []byte("mine\n"), 0o644))
	home := shortHome(t)
	t.Cleanup(func() { sage(t, home, "", "session", "stop", "--all") })

	r := sage(t, home, "", "exec", "--mode", "local", "--workspace", ws, "--", "cat README && echo a > a.txt")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "mine\n", r.stdout)
	r = sage(t, home, "", "exec", "--mode", "local", "--session", "proj", "--workspace", ws, "--", "mkdir -p d && echo b > d/b.txt")
	require.Equal(t, 0, r.code, r.stderr)

	url := startSandboxd(t, home, "--workspace", ws)
	cmd := cliCommand(home, "", "exec", "--mode", "remote", "--", "echo c > c.txt")
	cmd.Env = append(cmd.Env, "SAGE_REMOTE_PROVIDER=aio", "SAGE_REMOTE_URL="+url)
	r = runCmd(t, cmd)
	require.Equal(t, 0, r.code, r.stderr)

	for _, p := range []string{"", "README", "a.txt", "d", "d/b.txt", "c.txt"} {
		assert.Equal(t, owner, ownerOf(filepath.Join(ws, p)), "%s is the folder owner's", p)
	}
	fi, err := os.Stat(ws)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the folder keeps its mode")
}
