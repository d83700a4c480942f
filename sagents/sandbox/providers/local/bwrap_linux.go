//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/seccomp"
)

// SandboxPath is PATH inside the sandbox (the venv's bin is put first once
// it exists). Host PATH entries mean nothing inside.
const SandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}

// credential runs bwrap as the session's uid, with no supplementary
// groups.
func (id *identity) credential() *syscall.Credential {
	if id == nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(id.uid), Gid: uint32(id.gid), Groups: []uint32{}}
}

type bwrapIsolator struct {
	bwrap     string
	hostWS    string
	virtualWS string
	mounts    []sandbox.VolumeMount
	network   bool
	limits    Limits
	system    []SystemPath
	maskFiles []string
	maskDirs  []string
	resolvDir string // bound when the network is open and resolv.conf points outside /etc
	cg        *cgroupSet
	egress    *egressProxy // network allowlist: run every command behind the bridge
	ident     *identity    // the host uid bwrap runs as (sage is root); nil: the caller's own
	umaskCmd  string       // "umask 077", set before every command
	seccomp   []byte       // the filter program, loaded by bwrap --seccomp
}

func newIsolator(ctx context.Context, cfg sandbox.Config, s *Sandbox) (isolator, error) {
	switch cfg.Local.Isolation.Linux {
	case sandbox.IsolationNone:
		if cfg.Local.Network == sandbox.NetworkAllowlist {
			return nil, &sandbox.ConfigError{Field: "sandbox.local.network", Value: string(cfg.Local.Network),
				Reason: "the allowlist needs the sandbox's own network namespace; isolation none has none"}
		}
		return newNoIsolation(s)
	case sandbox.IsolationGvisor:
		return newGvisor(ctx, cfg, s)
	case "", sandbox.IsolationAuto, sandbox.IsolationBwrap:
	default:
		return nil, &sandbox.ConfigError{Field: "sandbox.local.isolation.linux", Value: cfg.Local.Isolation.Linux, Reason: "want auto, bwrap, gvisor or none"}
	}
	bw, err := findBwrap(ctx)
	if err != nil {
		return nil, err
	}
	iso := &bwrapIsolator{bwrap: bw, hostWS: s.hostWS, mounts: cfg.Mounts,
		network: cfg.Local.Network == sandbox.NetworkOpen, limits: s.limits,
		system: systemPaths(), resolvDir: resolvDir(), egress: s.egress, ident: s.ident,
		umaskCmd: fmt.Sprintf("umask %03o", s.umask)}
	iso.maskFiles, iso.maskDirs = etcSecrets()
	if iso.seccomp, err = seccomp.Program(seccomp.Options{ExtraDeny: cfg.Local.SeccompDeny}); err != nil {
		return nil, &sandbox.ConfigError{Field: "sandbox.local.seccomp.deny", Value: strings.Join(cfg.Local.SeccompDeny, ","), Reason: err.Error()}
	}
	if iso.network {
		slog.Warn("local sandbox: network is open", "sandbox", s.id)
	}
	if iso.cg, err = limitCgroups(s.id, s.limits); err != nil {
		return nil, err
	}
	return iso, nil
}

func (b *bwrapIsolator) virtualWorkspace(cfg sandbox.Config, _ string) string {
	b.virtualWS = cfg.VirtualWorkspace
	if b.virtualWS == "" {
		b.virtualWS = DefaultVirtualWorkspace
	}
	return b.virtualWS
}

func (b *bwrapIsolator) close() error { return b.cg.remove() }

func (b *bwrapIsolator) place(_, preferred string) string { return preferred }

var bwrapProbe sync.Map // bwrap path -> error (nil when it works)

// findBwrap finds bwrap and proves, once per process, that it can create
// the namespaces local mode needs.
func findBwrap(ctx context.Context) (string, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("%w: bwrap not found on PATH; fix: apt-get install bubblewrap (Debian/Ubuntu) or dnf install bubblewrap; run 'sage doctor'", sandbox.ErrIsolationUnavailable)
	}
	if v, ok := bwrapProbe.Load(p); ok {
		if v == nil {
			return p, nil
		}
		return "", v.(error)
	}
	out, err := exec.CommandContext(ctx, p, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true").CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		perr := fmt.Errorf("%w: %s cannot create namespaces: %s; fix: allow unprivileged user namespaces (user.max_user_namespaces > 0; on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap); run 'sage doctor'",
			sandbox.ErrIsolationUnavailable, p, strings.TrimSpace(string(out)))
		bwrapProbe.Store(p, perr)
		return "", perr
	}
	bwrapProbe.Store(p, nil)
	return p, nil
}

// systemPaths lists the system directories that exist on this host.
func systemPaths() []SystemPath {
	var out []SystemPath
	for _, p := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				out = append(out, SystemPath{Path: p, Symlink: target})
			}
		case fi.IsDir():
			out = append(out, SystemPath{Path: p})
		}
	}
	return out
}

// etcSecrets lists what to hide under /etc: the well-known secrets, and
// every file or directory that others may not read (as root, uid 0 inside
// maps to root outside, so permissions alone would not hide them: Docker's
// key.json, WireGuard and NetworkManager keys, keytabs, ...). Computed once.
func etcSecrets() (files, dirs []string) {
	etcOnce.Do(func() { etcFiles, etcDirs = scanEtc("/etc") })
	return etcFiles, etcDirs
}

var (
	etcOnce           sync.Once
	etcFiles, etcDirs []string
)

func scanEtc(root string) (files, dirs []string) {
	known := map[string]bool{"/etc/shadow": true, "/etc/shadow-": true, "/etc/gshadow": true, "/etc/gshadow-": true,
		"/etc/sudoers": true, "/etc/security/opasswd": true, "/etc/machine-id": true, "/etc/sudoers.d": true, "/etc/ssl/private": true}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, ierr := d.Info()
		if ierr != nil {
			return nil
		}
		secret := known[p] || fi.Mode().Perm()&0o004 == 0 || strings.HasSuffix(p, "_key") && strings.HasPrefix(p, "/etc/ssh/")
		switch {
		case secret && d.IsDir():
			dirs = append(dirs, p)
			return filepath.SkipDir
		case secret && fi.Mode().IsRegular():
			files = append(files, p)
		}
		return nil
	})
	return files, dirs
}

// resolvDir is the directory behind /etc/resolv.conf when it is a symlink
// out of /etc (systemd-resolved), so DNS works with the network open.
func resolvDir() string {
	real, err := filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil || strings.HasPrefix(real, "/etc/") {
		return ""
	}
	return filepath.Dir(real)
}

func (b *bwrapIsolator) env(extra map[string]string, venv string) map[string]string {
	env := map[string]string{}
	for _, kv := range sandbox.Environ(nil, b.virtualWS, nil) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	env["PATH"] = SandboxPath
	if venv != "" {
		env["PATH"] = venv + "/bin:" + SandboxPath
		env["VIRTUAL_ENV"] = venv
	}
	env["TMPDIR"] = "/tmp"
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// Protections the red-team tests switch off one at a time, in their
// controls, to prove each test detects its attack. Always on otherwise.
var (
	protectFDs      = true // seal inherited descriptors before bwrap starts
	argsViaFD       = true // bwrap's arguments (the environment) through a memfd
	bindWorkspaceFD = true // bind the workspace from a descriptor opened without symlinks
	useSeccomp      = true // load the seccomp filter
)

func (b *bwrapIsolator) wrap(inv invocation) (w *wrapped, err error) {
	if protectFDs {
		sealInheritedFDs()
	}
	var ws *os.File
	if bindWorkspaceFD {
		if ws, err = openWorkspace(b.hostWS, b.ident); err != nil {
			return nil, err
		}
	} else {
		ws, _ = os.Open(os.DevNull)
	}
	lim := b.limits
	if inv.session { // the budget is each command's (sessionRun), not the supervisor's
		lim.CPUTime = 0
	}
	g, err := newGate(b.cg, lim)
	if err != nil {
		ws.Close()
		return nil, err
	}
	g.ident = b.ident
	defer func() {
		if err != nil {
			ws.Close()
			g.close()
			g.infoW.Close()
			g.blockR.Close()
		}
	}()
	inv.argv = withUmask(inv.argv, b.umaskCmd)
	if b.egress != nil {
		inv = b.egress.bridge(inv, g.bridgeAS())
	}
	var ro []string
	if b.network && b.resolvDir != "" {
		ro = append(ro, b.resolvDir)
	}
	mounts := append([]sandbox.VolumeMount{}, b.mounts...)
	for _, x := range inv.binds {
		if x.readOnly && x.host == x.inside {
			ro = append(ro, x.host)
		} else {
			mounts = append(mounts, sandbox.VolumeMount{HostPath: x.host, SandboxPath: x.inside, ReadOnly: x.readOnly})
		}
	}
	// Child descriptors: 3 info, 4 block, 5 arguments, 6 workspace, 7
	// seccomp filter. Nothing else reaches bwrap (sealInheritedFDs).
	o := BwrapOptions{
		Network: b.network, Env: b.env(inv.env, inv.venv), System: b.system, Etc: true,
		MaskFiles: b.maskFiles, MaskDirs: b.maskDirs, ReadOnly: ro, TmpBytes: b.limits.TmpBytes, ShmBytes: b.limits.ShmBytes,
		Workspace: VolumeBind{Host: b.hostWS, Inside: b.virtualWS}, Mounts: mounts,
		Chdir: inv.chdir, InfoFD: 3, BlockFD: 4, WorkspaceFD: 6, MapRoot: b.ident != nil,
	}
	if !bindWorkspaceFD {
		o.WorkspaceFD = 0
	}
	files := append(g.childFiles(), nil, ws)
	if b.seccomp != nil && useSeccomp {
		sf, err := seccomp.File(b.seccomp)
		if err != nil {
			return nil, err
		}
		o.SeccompFD = 7
		files = append(files, sf)
	}
	// The arguments, environment included, travel through a memfd
	// (--args): the host's /proc/PID/cmdline of bwrap shows none of them.
	af, err := memfd("sage-bwrap-args", []byte(strings.Join(BwrapArgs(o), "\x00")+"\x00"))
	if err != nil {
		closeFiles(files[4:])
		return nil, err
	}
	files[2] = af
	own := files[2:]
	argv := append([]string{b.bwrap, "--args", "5", "--"}, inv.argv...)
	if !argsViaFD {
		argv = append(append(append([]string{b.bwrap}, BwrapArgs(o)...), "--"), inv.argv...)
	}
	return &wrapped{path: b.bwrap, args: argv, dir: "/", env: []string{"PATH=" + SandboxPath},
		extraFiles: files, cred: b.ident.credential(), started: g.open, terminate: g.terminate,
		done: func() { g.close(); closeFiles(own) }, report: g.cmd.end}, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// memfd holds data in an anonymous, sealed-size file for a child to read.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("local: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("local: memfd: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("local: memfd: %w", err)
	}
	return f, nil
}

// sealInheritedFDs marks every descriptor above stderr close-on-exec. Go
// opens its own that way, but a descriptor the caller of this program left
// open (sage exec ... 8</) would otherwise pass through bwrap into the
// command: a handle on a host directory. Only stdio and the files given
// to each child explicitly (dup'ed by os/exec) reach bwrap.
func sealInheritedFDs() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd") // kernels before 5.11
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}

// openWorkspace opens the workspace for --bind-fd, refusing a symlink
// anywhere on its path (openat2 RESOLVE_NO_SYMLINKS), and, when bwrap runs
// as the session's uid, a workspace that is no longer that uid's. It runs
// before every command, so a workspace swapped between commands is caught.
func openWorkspace(ws string, id *identity) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, ws, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if errors.Is(err, unix.ENOSYS) { // kernels before 5.6: O_NOFOLLOW on the last component
		fd, err = unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open workspace", Path: ws, Err: fmt.Errorf("%w (a symlink on its path, or it is gone): %w", fs.ErrPermission, err)}
	}
	f := os.NewFile(uintptr(fd), ws)
	if id != nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != id.uid {
			f.Close()
			return nil, &fs.PathError{Op: "open workspace", Path: ws, Err: fmt.Errorf("%w: no longer owned by the session's uid %d", fs.ErrPermission, id.uid)}
		}
	}
	return f, nil
}

// withUmask sets the file mode creation mask of the command: prepended to
// a shell command on its first line (line numbers stay), else through a
// shell that sets it and execs the command.
func withUmask(argv []string, set string) []string {
	if len(argv) >= 3 && argv[0] == shell && argv[1] == "-c" {
		out := append([]string{}, argv...)
		out[2] = set + "; " + argv[2]
		return out
	}
	return append([]string{shell, "-c", set + ` && exec "$@"`, "sh"}, argv...)
}

// gate holds a starting sandbox between bwrap's namespace setup and the
// exec of the command (bwrap --info-fd 3 --block-fd 4): once bwrap says
// the sandbox's pid, the gate puts that process into the cgroups and sets
// its rlimits with prlimit(2), then lets it run. Every process of the
// command is born under the limits, and no helper runs inside.
type gate struct {
	ident          *identity // bwrap's uid, when not the caller's
	cg             *cgroupSet
	limits         Limits
	noAS           bool // the network bridge sets RLIMIT_AS on the command instead
	infoR, infoW   *os.File
	blockR, blockW *os.File
	pid            atomic.Int64
	cmd            *cmdCgroup // the command's CPU budget; nil without a CPU limit
}

func newGate(cg *cgroupSet, l Limits) (*gate, error) {
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
	if g.cmd, err = cg.command(l.CPUTime); err != nil {
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
	if g.cg.memory() {
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
	if err := g.cg.join(info.ChildPID); err != nil {
		return err
	}
	if err := g.cmd.start(info.ChildPID); err != nil {
		return err
	}
	if err := setRlimits(info.ChildPID, g.ident, g.limits.rlimits(g.cg.memory() || g.noAS)); err != nil {
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
	g.cmd.release()
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

// BwrapCommand returns bwrap running argv with this sandbox's argument
// list, directly (no gate, no cgroup, no limits, arguments on the command
// line, the workspace bound by path), as the same uid and with the same
// seccomp filter: the baseline the benchmarks compare against. It is nil
// with isolation none. The caller runs it once.
func (s *Sandbox) BwrapCommand(argv ...string) *exec.Cmd {
	b, ok := s.iso.(*bwrapIsolator)
	if !ok {
		return nil
	}
	o := BwrapOptions{
		Network: b.network, Env: b.env(nil, ""), System: b.system, Etc: true,
		MaskFiles: b.maskFiles, MaskDirs: b.maskDirs, TmpBytes: b.limits.TmpBytes, ShmBytes: b.limits.ShmBytes,
		Workspace: VolumeBind{Host: b.hostWS, Inside: b.virtualWS}, Mounts: b.mounts, Chdir: b.virtualWS,
		MapRoot: b.ident != nil,
	}
	cmd := exec.Command(b.bwrap)
	if b.seccomp != nil {
		if f, err := seccomp.File(b.seccomp); err == nil {
			cmd.ExtraFiles = []*os.File{f}
			o.SeccompFD = 3
		}
	}
	cmd.Args = append(append(append(cmd.Args, BwrapArgs(o)...), "--"), argv...)
	cmd.SysProcAttr = sysProcAttr(b.ident.credential())
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
func setRlimits(pid int, id *identity, rls []rlimit) error {
	set := func() error {
		for _, r := range rls {
			lim := unix.Rlimit{Cur: r.soft, Max: r.max}
			if err := unix.Prlimit(pid, r.resource, &lim, nil); err != nil {
				return fmt.Errorf("local: set RLIMIT %s on the sandbox: %w", r.flag, err)
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
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(id.gid), keep, keep); e != 0 {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("local: rlimits: setresgid: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(id.uid), keep, keep); e != 0 {
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
