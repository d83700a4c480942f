//go:build linux

package limits

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// cpuPollInterval is how often the watchdog reads a command's CPU usage:
// a command with n busy processes overshoots its budget by at most about
// n times this.
const cpuPollInterval = 50 * time.Millisecond

// CommandCgroup is the CPU-accounting cgroup of one command (each foreground
// command and each background task has its own, under the sandbox's),
// with the watchdog that kills the command once all its processes
// together used up the CPU time budget. RLIMIT_CPU stays as a
// per-process backstop, one second above the budget.
type CommandCgroup struct {
	dir    string
	v2     bool
	budget time.Duration

	startOnce, endOnce, releaseOnce sync.Once
	stop, stopped                   chan struct{}
	fired                           atomic.Bool
}

// Command creates the CPU cgroup of a new command: nil when the sandbox
// has no CPU time limit.
func (c *Cgroups) Command(budget time.Duration) (*CommandCgroup, error) {
	if c == nil || budget <= 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return nil, fmt.Errorf("local: command cgroup: %w", driver.ErrClosed)
	}
	if c.cpuParent == "" {
		return nil, nil
	}
	c.commands++
	dir := filepath.Join(c.cpuParent, "cmd-"+strconv.Itoa(c.commands))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local: command cgroup: %w", err)
	}
	return &CommandCgroup{dir: dir, v2: c.cpuV2, budget: budget, stop: make(chan struct{}), stopped: make(chan struct{})}, nil
}

// Budget is the command's CPU time budget.
func (k *CommandCgroup) Budget() time.Duration { return k.budget }

// Procs is the cgroup.procs file the command joins.
func (k *CommandCgroup) Procs() string { return filepath.Join(k.dir, "cgroup.procs") }

// Start puts pid into the command's cgroup (pid 0: the command joins
// itself, see trampoline) and starts the watchdog.
func (k *CommandCgroup) Start(pid int) error {
	if k == nil {
		return nil
	}
	if pid > 0 {
		if err := os.WriteFile(k.Procs(), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("local: join the command's CPU cgroup: %w", err)
		}
	}
	k.startOnce.Do(func() { go k.watch() })
	return nil
}

func (k *CommandCgroup) watch() {
	defer close(k.stopped)
	t := time.NewTicker(cpuPollInterval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		if used, err := k.used(); err == nil && used >= k.budget {
			k.fired.Store(true)
			k.kill()
			return
		}
	}
}

// used is the CPU time all the command's processes used so far.
func (k *CommandCgroup) used() (time.Duration, error) {
	if k.v2 {
		b, err := ReadSmall(filepath.Join(k.dir, "cpu.stat"))
		if err != nil {
			return 0, err
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("usage_usec ")); ok {
				n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
				return time.Duration(n) * time.Microsecond, err
			}
		}
		return 0, errors.New("local: cpu.stat has no usage_usec")
	}
	b, err := ReadSmall(filepath.Join(k.dir, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return time.Duration(n), err
}

// kill ends every process of the command at once: no SIGTERM and grace
// period, which would let the command burn more CPU. With bwrap the
// sandbox's init is among them, and its death takes the whole pid
// namespace down.
func (k *CommandCgroup) kill() {
	if k.v2 && os.WriteFile(filepath.Join(k.dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for range 50 {
		b, err := ReadSmall(k.Procs())
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return
		}
		for _, f := range bytes.Fields(b) {
			if pid, _ := strconv.Atoi(string(f)); pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// End stops the watchdog and, when res is given, says in it whether the
// command was killed for its CPU budget: by the watchdog, or by
// RLIMIT_CPU with the budget used up.
func (k *CommandCgroup) End(res *driver.CommandResult) {
	if k == nil {
		return
	}
	k.endOnce.Do(func() {
		close(k.stop)
		k.startOnce.Do(func() { close(k.stopped) }) // never started
		<-k.stopped
	})
	if res == nil {
		return
	}
	exceeded := k.fired.Load()
	if !exceeded && res.ExitCode == SIGXCPUExit {
		// RLIMIT_CPU (the budget plus a second) fired first: it counts
		// whole clock ticks, so may run ahead of the cgroup's exact count.
		used, err := k.used()
		exceeded = err == nil && used >= k.budget*9/10
	}
	if exceeded {
		res.CPUTimeExceeded, res.Success = true, false
		res.ExitCode, res.Signal = SIGXCPUExit, "SIGXCPU"
	}
}

// Release stops the watchdog and removes the cgroup, killing what is
// left in it. Idempotent.
func (k *CommandCgroup) Release() {
	if k == nil {
		return
	}
	k.End(nil)
	k.releaseOnce.Do(func() {
		if err := removeCgroup(k.dir); err != nil {
			slog.Warn("local sandbox: command cgroup left behind", "err", err)
		}
	})
}

// ReadSmall reads a cgroup file of at most 4 KiB.
func ReadSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}
