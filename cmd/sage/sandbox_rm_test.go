package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/dockerbackend"
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

// Issue 35, item 3: after kill -9 of two `sage exec` processes that each
// held a thread's sandbox and a warm pool slot, `sage sandbox rm --all`
// leaves nothing: the old one released the threads' sandboxes only (the
// unclaimed pool slots were never listed, and ran on with their slot
// directories).
func TestSandboxRmAllAfterKill9(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := dockerWithImage(t, ctx)
	home := sandboxtest.TempDir(t)
	prefix := fmt.Sprintf("sagetest-k9-%d-%x", os.Getpid(), time.Now().UnixNano()&0xffffff)
	byPrefix := filters.NewArgs(filters.Arg("label", dockerbackend.LabelPrefix+"="+prefix))
	t.Cleanup(func() { // whatever the test left: only this test's containers
		cs, _ := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: byPrefix})
		for _, c := range cs {
			_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})
	env := append(os.Environ(), "SAGE_HOME="+home, "SAGE_AIO_CONTAINER_PREFIX="+prefix, "SAGE_AIO_POOL_SIZE=1")
	var procs []*exec.Cmd
	for _, session := range []string{"k9-a", "k9-b"} {
		cmd := exec.Command(sageBin, "exec", "--mode", "remote", "--remote-provider", "aio", "--session", session, "--", "sleep 600")
		cmd.Env = env
		require.NoError(t, cmd.Start())
		procs = append(procs, cmd)
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	running := func() int {
		cs, err := cli.ContainerList(ctx, container.ListOptions{Filters: byPrefix})
		require.NoError(t, err)
		return len(cs)
	}
	require.Eventually(t, func() bool { return running() == 4 }, 3*time.Minute, 200*time.Millisecond,
		"two threads' sandboxes and two pool slots")
	for _, cmd := range procs {
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
	}
	run := func(args ...string) cliRun {
		cmd := exec.Command(sageBin, args...)
		cmd.Env = env
		r := runCmd(t, cmd)
		require.Equal(t, 0, r.code, r.stderr)
		return r
	}
	r := run("sandbox", "ls", "--pool")
	assert.Contains(t, r.stdout, "2 unassigned pool sandboxes")
	assert.Contains(t, r.stdout, "(dead)", "the pool slots' owners are dead")
	run("sandbox", "rm", "--all")
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: byPrefix})
	require.NoError(t, err)
	assert.Empty(t, cs, "sandbox rm --all left containers of dead owners")
	slots, _ := os.ReadDir(filepath.Join(home, "pool"))
	assert.Empty(t, slots, "pool slot directories are left")
}
