package hostkit

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/driver"
)

func sh(cmd string) ProcessSpec {
	return ProcessSpec{Path: "/bin/sh", Args: []string{"sh", "-c", cmd}, Env: Environ(nil, "", nil)}
}

func TestRunProcessTimeoutKillsGroup(t *testing.T) {
	spec := sh("echo $$; sleep 100 & echo $!; sleep 100; wait")
	spec.Timeout = time.Second
	start := time.Now()
	res, err := RunProcess(context.Background(), spec)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 3*time.Second+driver.DefaultKillGrace)
	assert.True(t, res.TimedOut)
	assert.False(t, res.Success)
	pids := strings.Fields(res.Stdout)
	require.Len(t, pids, 2, "partial output kept: %q", res.Stdout)
	for _, p := range pids {
		pid, _ := strconv.Atoi(p)
		assert.True(t, goneSoon(pid), "pid %d survived", pid)
	}
}

func TestRunProcessTermIgnoredGetsKilled(t *testing.T) {
	spec := sh("trap '' TERM; echo ready; while :; do sleep 0.05; done")
	spec.Timeout = 300 * time.Millisecond
	spec.KillGrace = 200 * time.Millisecond
	res, err := RunProcess(context.Background(), spec)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Equal(t, "SIGKILL", res.Signal)
	assert.Equal(t, 137, res.ExitCode)
}

// A grandchild in its own session holds stdout open and is not in the
// process group: the call still returns, bounded by drainDeadline.
func TestRunProcessEscapedGrandchildCannotHang(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		testenv.Missing(t, "/usr/bin/setsid", testenv.SetupFix+" (apt-get install util-linux)")
	}
	spec := sh("setsid sleep 7.31 & echo ok")
	start := time.Now()
	res, err := RunProcess(context.Background(), spec)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), drainDeadline+3*time.Second)
	assert.Equal(t, "ok\n", res.Stdout)
	killByToken(t, "7.31")
}

func killByToken(t *testing.T, token string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), token) {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func TestRunProcessStartError(t *testing.T) {
	_, err := RunProcess(context.Background(), ProcessSpec{Path: "/no/such/binary", Args: []string{"x"}})
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestRunProcessCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := RunProcess(ctx, sh("echo partial; sleep 50"))
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.NotNil(t, res)
	assert.Equal(t, "partial\n", res.Stdout)
	assert.False(t, res.TimedOut)
}

func TestRunProcessStdinNotDrainedDoesNotHang(t *testing.T) {
	spec := sh("exit 0")
	spec.Stdin = neverEnding{}
	start := time.Now()
	res, err := RunProcess(context.Background(), spec)
	require.NoError(t, err)
	assert.True(t, res.Success)
	assert.Less(t, time.Since(start), drainDeadline+3*time.Second)
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	time.Sleep(10 * time.Millisecond)
	return copy(p, "y\n"), nil
}

// goneSoon waits up to 2 s for pid to exit (a zombie counts as gone:
// signals are delivered asynchronously).
func goneSoon(pid int) bool {
	for range 40 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
