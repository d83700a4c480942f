//go:build linux

package local

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/memfd"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/seccomp"
)

// SandboxPath is PATH inside the sandbox (the venv's bin is put first once
// it exists). Host PATH entries mean nothing inside.
const SandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}

type bwrapIsolator struct {
	bwrap     string
	hostWS    string
	virtualWS string
	mounts    []driver.VolumeMount
	network   bool
	limits    Limits
	system    []SystemPath
	maskFiles []string
	maskDirs  []string
	resolvDir string // bound when the network is open and resolv.conf points outside /etc
	cg        *limits.Cgroups
	egress    *egressProxy   // network allowlist: run every command behind the bridge
	ident     *uids.Identity // the host uid bwrap runs as (sage is root); nil: the caller's own
	umaskCmd  string         // "umask 077", set before every command
	seccomp   []byte         // the filter program, loaded by bwrap --seccomp
}

func newIsolator(ctx context.Context, cfg driver.Config, s *Sandbox) (isolator, error) {
	switch cfg.Local.Isolation.Linux {
	case driver.IsolationNone:
		if cfg.Local.Network == driver.NetworkAllowlist {
			return nil, &driver.ConfigError{Field: "sandbox.local.network", Value: string(cfg.Local.Network),
				Reason: "the allowlist needs the sandbox's own network namespace; isolation none has none"}
		}
		return newNoIsolation(s)
	case driver.IsolationGvisor:
		return newGvisor(ctx, cfg, s)
	case "", driver.IsolationAuto, driver.IsolationBwrap:
	default:
		return nil, &driver.ConfigError{Field: "sandbox.local.isolation.linux", Value: cfg.Local.Isolation.Linux, Reason: "want auto, bwrap, gvisor or none"}
	}
	bw, err := findBwrap(ctx)
	if err != nil {
		return nil, err
	}
	iso := &bwrapIsolator{bwrap: bw, hostWS: s.bindWS, mounts: cfg.Mounts,
		network: cfg.Local.Network == driver.NetworkOpen, limits: s.limits,
		system: systemPaths(), resolvDir: resolvDir(), egress: s.egress, ident: s.ident,
		umaskCmd: fmt.Sprintf("umask %03o", s.umask)}
	iso.maskFiles, iso.maskDirs = etcSecrets()
	if iso.seccomp, err = seccomp.Program(seccomp.Options{ExtraDeny: cfg.Local.SeccompDeny}); err != nil {
		return nil, &driver.ConfigError{Field: "sandbox.local.seccomp.deny", Value: strings.Join(cfg.Local.SeccompDeny, ","), Reason: err.Error()}
	}
	if iso.network {
		slog.Warn("local sandbox: network is open", "sandbox", s.id)
	}
	cgLimits := s.limits
	if s.sess.opts.Enabled && cgLimits.Pids > 0 { // the supervisor's own (sessionTaskReserve)
		cgLimits.Pids += sessionTaskReserve
	}
	if iso.cg, err = limits.NewCgroups(s.id, cgLimits); err != nil {
		return nil, err
	}
	// bwrap is forked from a host thread in the cgroups once it joined
	// them, in the background (cgroup_thread_linux.go).
	iso.cg.StartThread()
	return iso, nil
}

func (b *bwrapIsolator) virtualWorkspace(cfg driver.Config, _ string) string {
	b.virtualWS = virtualWorkspaceOf(cfg)
	return b.virtualWS
}

// virtualWorkspaceOf is where the workspace shows inside the sandbox.
func virtualWorkspaceOf(cfg driver.Config) string {
	if cfg.VirtualWorkspace != "" {
		return cfg.VirtualWorkspace
	}
	return DefaultVirtualWorkspace
}

func (b *bwrapIsolator) close() error { return b.cg.Remove() }

func (b *bwrapIsolator) kind() string { return driver.IsolationBwrap }

func (b *bwrapIsolator) place(_, preferred string) string { return preferred }

var bwrapProbe sync.Map // bwrap path -> error (nil when it works)

// findBwrap finds bwrap and proves, once per process, that it can create
// the namespaces local mode needs.
func findBwrap(ctx context.Context) (string, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("%w: bwrap not found on PATH; fix: apt-get install bubblewrap (Debian/Ubuntu) or dnf install bubblewrap; run 'sage doctor'", driver.ErrIsolationUnavailable)
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
			driver.ErrIsolationUnavailable, p, strings.TrimSpace(string(out)))
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
	for _, kv := range hostkit.Environ(nil, b.virtualWS, nil) {
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
	// The session sandbox's (#31): its supervisor as pid 1 (no bwrap init
	// inside), each command in a Landlock domain of its own, the host
	// ending a command the supervisor did not end, the session's output
	// through a pipe (no host file inside).
	supervisorAsPID1    = true
	commandDomains      = true
	hostEnforcesTimeout = true
	sessionLogPipe      = true
)

func (b *bwrapIsolator) wrap(inv invocation) (w *wrapped, err error) {
	b.cg.Prime() // the gate's join, if any, waits less (cgroup_prime_linux.go)
	if protectFDs {
		sealInheritedFDs()
	}
	var ws *os.File
	if bindWorkspaceFD {
		if ws, err = uids.OpenWorkspace(b.hostWS, b.ident); err != nil {
			return nil, err
		}
	} else {
		ws, _ = os.Open(os.DevNull)
	}
	lim := b.limits
	if inv.session { // the budget is each command's (sessionRun), not the supervisor's
		lim.CPUTime = 0
		if lim.Pids > 0 { // each command gets the pids limit itself (--nproc)
			lim.Pids += sessionTaskReserve
		}
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
	if !inv.session { // the supervisor sets its umask itself (--umask)
		inv.argv = withUmask(inv.argv, b.umaskCmd)
	}
	if b.egress != nil {
		inv = b.egress.bridge(inv, g.bridgeAS())
	}
	var ro []string
	if b.network && b.resolvDir != "" {
		ro = append(ro, b.resolvDir)
	}
	ro, mounts := bindMounts(ro, b.mounts, inv.binds)
	// Child descriptors: 3 info, 4 block, 5 arguments, 6 workspace, 7
	// seccomp filter. Nothing else reaches bwrap (sealInheritedFDs).
	o := BwrapOptions{
		Network: b.network, Env: b.env(inv.env, inv.venv), System: b.system, Etc: true,
		MaskFiles: b.maskFiles, MaskDirs: b.maskDirs, ReadOnly: ro, TmpBytes: b.limits.TmpBytes, ShmBytes: b.limits.ShmBytes,
		Workspace: VolumeBind{Host: b.hostWS, Inside: b.virtualWS}, Mounts: mounts,
		Chdir: inv.chdir, InfoFD: 3, BlockFD: 4, WorkspaceFD: 6, MapRoot: b.ident != nil,
		AsPID1: inv.session && supervisorAsPID1,
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
	af, err := memfd.Sealed("sage-bwrap-args", []byte(strings.Join(BwrapArgs(o), "\x00")+"\x00"))
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
		extraFiles: files, cred: b.ident.Credential(), start: g.start, started: g.open, terminate: g.terminate,
		done: func() { g.close(); closeFiles(own) }, report: g.cmd.End}, nil
}

func (b *bwrapIsolator) limitsEnforced() driver.LimitsEnforced { return b.limits.Enforced(b.cg, true) }

// bindMounts adds an invocation's binds to what the sandbox shows: one
// read-only at its own host path to ro (shown as the system directories
// are), any other as a mount after the configured ones (left unchanged).
func bindMounts(ro []string, configured []driver.VolumeMount, binds []bind) ([]string, []driver.VolumeMount) {
	mounts := append([]driver.VolumeMount{}, configured...)
	for _, x := range binds {
		if x.readOnly && x.host == x.inside {
			ro = append(ro, x.host)
		} else {
			mounts = append(mounts, driver.VolumeMount{HostPath: x.host, SandboxPath: x.inside, ReadOnly: x.readOnly})
		}
	}
	return ro, mounts
}
