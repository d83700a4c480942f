package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Issue 35, item 5: kill -9 of `sage exec` with limits left its cgroups
// (pids, memory, cpuacct with a nested cmd-1, all empty once its
// sandbox died with it), and later runs did not sweep them. The next
// `sage exec` with a limit removes them.
func TestExecKill9LeavesNoCgroups(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux's")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (an ordinary user has no writable cgroups here)", "run the tests as root, as CI does")
	}
	own := map[string]string{} // controller -> this process's cgroup, which sage inherits
	b, err := os.ReadFile("/proc/self/cgroup")
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 {
			for _, c := range strings.Split(f[1], ",") {
				own[c] = f[2]
			}
		}
	}
	if _, v1 := own["pids"]; !v1 || syscall.Access(filepath.Join("/sys/fs/cgroup/pids", own["pids"]), 2) != nil {
		testenv.Missing(t, "writable cgroup v1 hierarchies", "run as root on a cgroup v1 host")
	}
	home := sandboxtest.TempDir(t)
	cmd := exec.Command(sageBin, "exec", "--pids", "64", "--memory", "256", "--cpu-time", "60", "--", "sleep 600")
	cmd.Env = append(os.Environ(), "SAGE_HOME="+home)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	glob := func() []string {
		var out []string
		for _, h := range []string{"pids", "memory", "cpuacct"} {
			m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", h, own[h], fmt.Sprintf("sage-*-o%d_*", cmd.Process.Pid)))
			out = append(out, m...)
		}
		return out
	}
	require.Eventually(t, func() bool { return len(glob()) == 3 }, time.Minute, 20*time.Millisecond, "the run's pids, memory and cpuacct cgroups")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	left := glob()
	require.Eventually(t, func() bool { // its sandbox dies with it
		for _, d := range left {
			if b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); strings.TrimSpace(string(b)) != "" {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)
	assert.Len(t, glob(), 3, "control: kill -9 leaves them")

	next := exec.Command(sageBin, "exec", "--pids", "64", "--", "true")
	next.Env = cmd.Env
	r := runCmd(t, next)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, glob(), "the dead run's cgroups were left")
}
