//go:build linux

package local_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// newGvisorAt is a gVisor session sandbox over ws and rt with a fixed id,
// as a session daemon opens its session again after a restart.
func newGvisorAt(t *testing.T, ws, rt string) *sandbox.Sandbox {
	t.Helper()
	cfg := sandbox.Config{Mode: sandbox.Local, Workspace: ws, RuntimeDir: rt, SandboxID: "gkill9",
		Local: sandbox.LocalConfig{Isolation: sandbox.Isolation{Linux: sandbox.IsolationGvisor}}}
	s, err := sandbox.New(context.Background(), cfg)
	require.NoError(t, err)
	return s
}

// TestGvisorSessionAfterKill9: a process running a gVisor session sandbox
// is killed with -9 (a session daemon, say); the next one that opens the
// same runtime directory and id runs commands (it failed on the killed
// one's bundle: "mkdir .../bundles/gkill9-1: file exists"), and leaves
// nothing of the killed one behind at its Close.
func TestGvisorSessionAfterKill9(t *testing.T) {
	if os.Getenv("SAGE_GKILL9_HELPER") != "" {
		t.Skip("the helper runs in TestGvisorKill9Helper")
	}
	requireGvisor(t)
	ws, rt := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run", "^TestGvisorKill9Helper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SAGE_GKILL9_HELPER="+ws+":"+rt)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(testenv.Processes("runsc", rt)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}

	s := newGvisorAt(t, ws, rt)
	assert.Equal(t, "before\nafter\n", ckRun(t, s, "cat /workspace/before; echo after"))
	require.NoError(t, s.Close(context.Background()))
	assert.Empty(t, testenv.Processes("runsc", rt), "no runsc of either process is left")
	assert.NoDirExists(t, rt+"/gvisor", "the killed process's bundles and state are gone with the new one's")
}

// TestGvisorKill9Helper is TestGvisorSessionAfterKill9's daemon: it runs
// a command in its session sandbox, says ready and waits to be killed.
func TestGvisorKill9Helper(t *testing.T) {
	v := os.Getenv("SAGE_GKILL9_HELPER")
	if v == "" {
		t.Skip("run by TestGvisorSessionAfterKill9")
	}
	ws, rt, _ := strings.Cut(v, ":")
	s := newGvisorAt(t, ws, rt)
	ckRun(t, s, "echo before > /workspace/before")
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
}
