//go:build unix

package passthrough

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// openAnon opens an anonymous passthrough sandbox and runs a background
// task in it to its end, so that its runtime directory holds the task's
// log; it returns the sandbox and that directory.
func openAnon(t testing.TB, cfg driver.Config) (*Sandbox, string) {
	t.Helper()
	d, err := New(context.Background(), cfg)
	require.NoError(t, err)
	s := d.(*Sandbox)
	task, err := s.StartBackground(context.Background(), "echo logged", driver.ExecOptions{})
	require.NoError(t, err)
	s.Wait(task.ID)
	require.FileExists(t, task.LogPath)
	require.DirExists(t, s.runtimeDir)
	return s, s.runtimeDir
}

// TestLeftoversHelper is the process TestRuntimeSweptAfterKill9 kills:
// it opens an anonymous sandbox, prints its runtime directory and waits
// until its stdin closes (or it is killed).
func TestLeftoversHelper(t *testing.T) {
	ws := os.Getenv("SAGE_PT_HELPER_WS")
	if ws == "" {
		t.Skip("a helper process of TestRuntimeSweptAfterKill9")
	}
	_, dir := openAnon(t, driver.Config{Workspace: ws})
	fmt.Println("runtime", dir)
	io.Copy(io.Discard, os.Stdin)
}

// TestRuntimeSweptAfterKill9: an anonymous sandbox's runtime directory
// (code files, task logs) outlives a process killed with -9; the next
// process's first anonymous open in that SAGE_HOME removes it and its
// lock, and leaves a live process's own (this test's) and a named
// sandbox's runtime directories as they are.
func TestRuntimeSweptAfterKill9(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SAGE_HOME", home)
	h := testenv.StartHelper(t, "TestLeftoversHelper", "SAGE_PT_HELPER_WS="+t.TempDir())
	var dead string
	h.ReadUntil(func(line string) bool {
		dead, _ = strings.CutPrefix(line, "runtime ")
		return dead == ""
	})
	require.NotEmpty(t, dead, "the helper opened no sandbox")

	mine, mineDir := openAnon(t, driver.Config{Workspace: t.TempDir()})
	defer mine.Close(context.Background())
	named := filepath.Join(t.TempDir(), "named-rt")
	n, err := New(context.Background(), driver.Config{Workspace: t.TempDir(), SandboxID: "pt-named", RuntimeDir: named})
	require.NoError(t, err)
	_, err = n.(*Sandbox).StartBackground(context.Background(), "true", driver.ExecOptions{})
	require.NoError(t, err)
	require.NoError(t, n.Close(context.Background()))
	h.Kill9()
	require.DirExists(t, dead, "kill -9 left its runtime directory")

	swept.Clear() // as a new process
	next, err := New(context.Background(), driver.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	defer next.Close(context.Background())
	assert.NoDirExists(t, dead, "the dead process's runtime directory is swept")
	assert.NoFileExists(t, dead+lockSuffix, "and its lock")
	assert.DirExists(t, mineDir, "a live process's own is kept")
	assert.FileExists(t, mineDir+lockSuffix)
	assert.DirExists(t, named, "a named sandbox's is never swept")

	require.NoError(t, mine.Close(context.Background()))
	require.NoError(t, next.Close(context.Background()))
	ents, err := os.ReadDir(filepath.Join(home, "runtime"))
	require.NoError(t, err)
	assert.Empty(t, ents, "Close removes the runtime directory and its lock")
}

// TestOpensWithoutWritableHome: where SAGE_HOME cannot be made (a Pod's
// read-only root, here a path under a regular file), an anonymous
// sandbox opens and runs commands as before, without the lock.
func TestOpensWithoutWritableHome(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	t.Setenv("SAGE_HOME", filepath.Join(file, "home"))
	d, err := New(context.Background(), driver.Config{Workspace: t.TempDir()})
	require.NoError(t, err)
	s := d.(*Sandbox)
	assert.Nil(t, s.runtimeLock)
	r, err := s.Exec(context.Background(), driver.ExecSpec{Command: "echo hi"})
	require.NoError(t, err)
	assert.Equal(t, "hi\n", r.Stdout)
	require.NoError(t, s.Close(context.Background()))
}
