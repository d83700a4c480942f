//go:build linux

package isolation

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/bwrapargs"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/seccomp"
)

// gate holds a starting sandbox between bwrap's namespace setup and the
// exec of the command (bwrap --info-fd 3 --block-fd 4): once bwrap says
// the sandbox's pid, the gate puts that process into the cgroups and sets
// its rlimits with prlimit(2), then lets it run. Every process of the
// command is born under the limits, and no helper runs inside.
type gate struct {
	ident          *uids.Identity // bwrap's uid, when not the caller's
	cg             *limits.Cgroups
	limits         limits.Limits
	noAS           bool // the network bridge sets RLIMIT_AS on the command instead
	infoR, infoW   *os.File
	blockR, blockW *os.File
	pid            atomic.Int64
	cmd            *limits.CommandCgroup // the command's CPU budget; nil without a CPU limit
	born           bool                  // bwrap was forked in the cgroups: nothing to join
}

// start starts bwrap, from the cgroup thread when it is in the cgroups
// (cgroup_thread_linux.go).
func (g *gate) start(cmd *exec.Cmd) error {
	born, err := g.cg.Start(cmd)
	g.born = born
	return err
}

func newGate(cg *limits.Cgroups, l limits.Limits) (*gate, error) {
	g := &gate{cg: cg, limits: l}
	var err error
	if g.infoR, g.infoW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if g.blockR, g.blockW, err = os.Pipe(); err != nil {
		g.infoR.Close()
		g.infoW.Close()
		return nil, fmt.Errorf("local: %w", err)
	}
	if g.cmd, err = cg.Command(l.CPUTime); err != nil {
		g.close()
		g.infoW.Close()
		g.blockR.Close()
		return nil, err
	}
	return g, nil
}

// bridgeAS hands RLIMIT_AS over to the network bridge: a Go program
// needs more address space than a small limit allows, so the gate leaves
// it out and the bridge sets it on the command before exec. It returns
// the limit for the bridge to set (0 when a memory cgroup bounds memory).
func (g *gate) bridgeAS() int64 {
	g.noAS = true
	if g.cg.Memory() {
		return 0
	}
	return g.limits.MemoryBytes
}

// childFiles become fds 3 and 4 of bwrap; the starter closes them here.
func (g *gate) childFiles() []*os.File { return []*os.File{g.infoW, g.blockR} }

// gateTimeout bounds the wait for bwrap to report the sandbox's pid.
const gateTimeout = 10 * time.Second

func (g *gate) open(int) error {
	g.infoR.SetReadDeadline(time.Now().Add(gateTimeout))
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(g.infoR).Decode(&info); err != nil || info.ChildPID <= 0 {
		return fmt.Errorf("local: bwrap exited before the command started (a mount it could not make, or namespaces it could not create: run the command again and see its stderr, or sage doctor): %w", err)
	}
	g.pid.Store(int64(info.ChildPID))
	if !g.born {
		if err := g.cg.Join(info.ChildPID); err != nil {
			return err
		}
	}
	if err := g.cmd.Start(info.ChildPID); err != nil {
		return err
	}
	if err := setRlimits(info.ChildPID, g.ident, g.limits.Rlimits(g.cg.Memory() || g.noAS)); err != nil {
		return err
	}
	_, err := g.blockW.Write([]byte{1})
	g.blockW.Close()
	if err != nil {
		return fmt.Errorf("local: release the sandbox: %w", err)
	}
	return nil
}

func (g *gate) close() {
	g.infoR.Close()
	g.blockW.Close()
	g.cmd.Release()
}

// terminate sends SIGTERM to the processes inside: they share the process
// group of the sandbox's init (pid 1 inside), which ignores it; the kill
// that follows takes everything down.
func (g *gate) terminate() {
	if pid := g.pid.Load(); pid > 0 {
		if err := syscall.Kill(-int(pid), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			slog.Debug("local sandbox: SIGTERM to the sandbox failed", "pid", pid, "err", err)
		}
	}
}

// Command returns bwrap running argv with this sandbox's argument list,
// directly (no gate, no cgroup, no limits, arguments on the command
// line, the workspace bound by path), as the same uid and with the same
// seccomp filter: the baseline the benchmarks compare against. The
// caller runs it once.
func (b *Bwrap) Command(argv ...string) *exec.Cmd {
	o := bwrapargs.Options{
		Network: b.network, Env: Env(b.virtualWS, nil, ""), System: b.system, Etc: true,
		MaskFiles: b.maskFiles, MaskDirs: b.maskDirs, TmpBytes: b.limits.TmpBytes, ShmBytes: b.limits.ShmBytes,
		Workspace: bwrapargs.VolumeBind{Host: b.hostWS, Inside: b.virtualWS}, Mounts: b.mounts, Chdir: b.virtualWS,
		MapRoot: b.ident != nil,
	}
	cmd := exec.Command(b.bwrap)
	if b.seccomp != nil {
		if f, err := seccomp.File(b.seccomp); err == nil {
			cmd.ExtraFiles = []*os.File{f}
			o.SeccompFD = 3
		}
	}
	cmd.Args = append(append(append(cmd.Args, bwrapargs.Args(o)...), "--"), argv...)
	cmd.SysProcAttr = (&Wrapped{Cred: b.ident.Credential()}).SysProcAttr()
	return cmd
}

// setRlimits sets the sandbox init's rlimits with prlimit(2). When bwrap
// runs as the session's uid, root needs CAP_SYS_RESOURCE for that, which
// containers usually drop; prlimit(2) also lets a caller whose real uid
// and gid are the target's do it. So the call is made from one OS thread
// whose real uid and gid are switched to the session's (effective and
// saved stay 0, so no capability is lost) and switched back after. The
// raw system calls change that thread alone; if switching back failed the
// thread stays locked and dies with this goroutine.
func setRlimits(pid int, id *uids.Identity, rls []limits.Rlimit) error {
	set := func() error {
		for _, r := range rls {
			lim := unix.Rlimit{Cur: r.Soft, Max: r.Max}
			if err := unix.Prlimit(pid, r.Resource, &lim, nil); err != nil {
				return fmt.Errorf("local: set RLIMIT %s on the sandbox: %w", r.Flag, err)
			}
		}
		return nil
	}
	if id == nil {
		return set()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		keep := ^uintptr(0) // -1: leave unchanged
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(id.GID), keep, keep); e != 0 {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("local: rlimits: setresgid: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(id.UID), keep, keep); e != 0 {
			if _, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, 0, keep, keep); e2 == 0 {
				runtime.UnlockOSThread()
			}
			done <- fmt.Errorf("local: rlimits: setresuid: %w", e)
			return
		}
		err := set()
		_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, 0, keep, keep)
		_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, 0, keep, keep)
		if e1 == 0 && e2 == 0 {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}
