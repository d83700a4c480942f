//go:build linux

package isolation

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
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/bwrapargs"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/memfd"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/seccomp"
)

// SandboxPath is PATH inside the sandbox (the venv's bin is put first once
// it exists). Host PATH entries mean nothing inside.
const SandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// SysProcAttr is how the process starts: killed with this one, as the
// host uid of Cred.
func (w *Wrapped) SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: w.Cred}
}

// Bwrap runs each command in a bubblewrap sandbox of its own (or a
// session sandbox's init), gated into the sandbox's cgroups and rlimits
// before its first instruction (gate_linux.go).
type Bwrap struct {
	bwrap     string
	hostWS    string
	virtualWS string
	mounts    []driver.VolumeMount
	network   bool
	limits    limits.Limits
	system    []bwrapargs.SystemPath
	maskFiles []string
	maskDirs  []string
	resolvDir string // bound when the network is open and resolv.conf points outside /etc
	cg        *limits.Cgroups
	egress    *Egress        // network allowlist: run every command behind the bridge
	ident     *uids.Identity // the host uid bwrap runs as (sage is root); nil: the caller's own
	umaskCmd  string         // "umask 077", set before every command
	seccomp   []byte         // the filter program, loaded by bwrap --seccomp
	reserve   int            // a session supervisor's tasks beyond the pids limit
}

// New returns the backend o.Isolation names on Linux: bwrap (auto),
// gVisor or none.
func New(ctx context.Context, o Options) (Backend, error) {
	switch o.Isolation {
	case driver.IsolationNone:
		if o.Network == driver.NetworkAllowlist {
			return nil, &driver.ConfigError{Field: "sandbox.local.network", Value: string(o.Network),
				Reason: "the allowlist needs the sandbox's own network namespace; isolation none has none"}
		}
		return newNone(o)
	case driver.IsolationGvisor:
		return newGvisor(ctx, o)
	case "", driver.IsolationAuto, driver.IsolationBwrap:
	default:
		return nil, &driver.ConfigError{Field: "sandbox.local.isolation.linux", Value: o.Isolation, Reason: "want auto, bwrap, gvisor or none"}
	}
	bw, err := findBwrap(ctx)
	if err != nil {
		return nil, err
	}
	iso := &Bwrap{bwrap: bw, hostWS: o.BindWorkspace, virtualWS: o.VirtualWorkspace, mounts: o.Mounts,
		network: o.Network == driver.NetworkOpen, limits: o.Limits,
		system: SystemPaths(), resolvDir: resolvDir(), egress: o.Egress, ident: o.Ident,
		umaskCmd: fmt.Sprintf("umask %03o", o.Umask), reserve: o.TaskReserve}
	iso.maskFiles, iso.maskDirs = EtcSecrets()
	if iso.seccomp, err = seccomp.Program(seccomp.Options{ExtraDeny: o.SeccompDeny}); err != nil {
		return nil, &driver.ConfigError{Field: "sandbox.local.seccomp.deny", Value: strings.Join(o.SeccompDeny, ","), Reason: err.Error()}
	}
	if iso.network {
		slog.Warn("local sandbox: network is open", "sandbox", o.ID)
	}
	cgLimits := o.Limits
	if o.Session && cgLimits.Pids > 0 { // the supervisor's own (Options.TaskReserve)
		cgLimits.Pids += o.TaskReserve
	}
	if iso.cg, err = limits.NewCgroups(o.ID, cgLimits); err != nil {
		return nil, err
	}
	// bwrap is forked from a host thread in the cgroups once it joined
	// them, in the background (cgroup_thread_linux.go).
	iso.cg.StartThread()
	return iso, nil
}

// VirtualWorkspace is where the workspace appears inside.
func (b *Bwrap) VirtualWorkspace() string { return b.virtualWS }

// Path is the bwrap program.
func (b *Bwrap) Path() string { return b.bwrap }

// Cgroups are the sandbox's cgroups, which hold every command.
func (b *Bwrap) Cgroups() *limits.Cgroups { return b.cg }

// Close removes the cgroups.
func (b *Bwrap) Close() error { return b.cg.Remove() }

// Kind is bwrap.
func (b *Bwrap) Kind() string { return driver.IsolationBwrap }

// Place is preferred: the sandbox has its own mount namespace.
func (b *Bwrap) Place(_, preferred string) string { return preferred }

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

// SystemPaths lists the system directories that exist on this host.
func SystemPaths() []bwrapargs.SystemPath {
	var out []bwrapargs.SystemPath
	for _, p := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				out = append(out, bwrapargs.SystemPath{Path: p, Symlink: target})
			}
		case fi.IsDir():
			out = append(out, bwrapargs.SystemPath{Path: p})
		}
	}
	return out
}

// EtcSecrets lists what to hide under /etc: the well-known secrets, and
// every file or directory that others may not read (as root, uid 0 inside
// maps to root outside, so permissions alone would not hide them: Docker's
// key.json, WireGuard and NetworkManager keys, keytabs, ...). Computed once.
func EtcSecrets() (files, dirs []string) {
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

// Env is the environment of a command inside a sandbox of its own mount
// namespace whose workspace appears at virtualWS: the host's safe
// variables, PATH (SandboxPath, the venv's bin first), TMPDIR and extra.
func Env(virtualWS string, extra map[string]string, venv string) map[string]string {
	env := map[string]string{}
	for _, kv := range hostkit.Environ(nil, virtualWS, nil) {
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

// Protections the red-team tests of package local switch off one at a
// time, in their controls, to prove each test detects its attack. Always
// on otherwise.
var (
	ProtectFDs      = true // seal inherited descriptors before bwrap starts
	ArgsViaFD       = true // bwrap's arguments (the environment) through a memfd
	BindWorkspaceFD = true // bind the workspace from a descriptor opened without symlinks
	UseSeccomp      = true // load the seccomp filter
	// SupervisorAsPID1: a session sandbox's supervisor is pid 1 (no bwrap
	// init inside; #31).
	SupervisorAsPID1 = true
)

// Wrap builds bwrap running inv behind the gate.
func (b *Bwrap) Wrap(inv Invocation) (w *Wrapped, err error) {
	b.cg.Prime() // the gate's join, if any, waits less (cgroup_prime_linux.go)
	if ProtectFDs {
		sealInheritedFDs()
	}
	var ws *os.File
	if BindWorkspaceFD {
		if ws, err = uids.OpenWorkspace(b.hostWS, b.ident); err != nil {
			return nil, err
		}
	} else {
		ws, _ = os.Open(os.DevNull)
	}
	lim := b.limits
	if inv.Session { // the budget is each command's, not the supervisor's
		lim.CPUTime = 0
		if lim.Pids > 0 { // each command gets the pids limit itself (--nproc)
			lim.Pids += b.reserve
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
	if !inv.Session { // the supervisor sets its umask itself (--umask)
		inv.Argv = withUmask(inv.Argv, b.umaskCmd)
	}
	if b.egress != nil {
		inv = b.egress.bridge(inv, g.bridgeAS())
	}
	var ro []string
	if b.network && b.resolvDir != "" {
		ro = append(ro, b.resolvDir)
	}
	ro, mounts := bindMounts(ro, b.mounts, inv.Binds)
	// Child descriptors: 3 info, 4 block, 5 arguments, 6 workspace, 7
	// seccomp filter. Nothing else reaches bwrap (sealInheritedFDs).
	o := bwrapargs.Options{
		Network: b.network, Env: Env(b.virtualWS, inv.Env, inv.Venv), System: b.system, Etc: true,
		MaskFiles: b.maskFiles, MaskDirs: b.maskDirs, ReadOnly: ro, TmpBytes: b.limits.TmpBytes, ShmBytes: b.limits.ShmBytes,
		Workspace: bwrapargs.VolumeBind{Host: b.hostWS, Inside: b.virtualWS}, Mounts: mounts,
		Chdir: inv.Chdir, InfoFD: 3, BlockFD: 4, WorkspaceFD: 6, MapRoot: b.ident != nil,
		AsPID1: inv.Session && SupervisorAsPID1,
	}
	if !BindWorkspaceFD {
		o.WorkspaceFD = 0
	}
	files := append(g.childFiles(), nil, ws)
	if b.seccomp != nil && UseSeccomp {
		sf, err := seccomp.File(b.seccomp)
		if err != nil {
			return nil, err
		}
		o.SeccompFD = 7
		files = append(files, sf)
	}
	// The arguments, environment included, travel through a memfd
	// (--args): the host's /proc/PID/cmdline of bwrap shows none of them.
	af, err := memfd.Sealed("sage-bwrap-args", []byte(strings.Join(bwrapargs.Args(o), "\x00")+"\x00"))
	if err != nil {
		closeFiles(files[4:])
		return nil, err
	}
	files[2] = af
	own := files[2:]
	argv := append([]string{b.bwrap, "--args", "5", "--"}, inv.Argv...)
	if !ArgsViaFD {
		argv = append(append(append([]string{b.bwrap}, bwrapargs.Args(o)...), "--"), inv.Argv...)
	}
	return &Wrapped{Path: b.bwrap, Args: argv, Dir: "/", Env: []string{"PATH=" + SandboxPath},
		ExtraFiles: files, Cred: b.ident.Credential(), Start: g.start, Started: g.open, Terminate: g.terminate,
		Done: func() { g.close(); closeFiles(own) }, Report: g.cmd.End}, nil
}

// LimitsEnforced: the cgroups and the rlimits the gate sets.
func (b *Bwrap) LimitsEnforced() driver.LimitsEnforced { return b.limits.Enforced(b.cg, true) }

// bindMounts adds an invocation's binds to what the sandbox shows: one
// read-only at its own host path to ro (shown as the system directories
// are), any other as a mount after the configured ones (left unchanged).
func bindMounts(ro []string, configured []driver.VolumeMount, binds []Bind) ([]string, []driver.VolumeMount) {
	mounts := append([]driver.VolumeMount{}, configured...)
	for _, x := range binds {
		if x.ReadOnly && x.Host == x.Inside {
			ro = append(ro, x.Host)
		} else {
			mounts = append(mounts, driver.VolumeMount{HostPath: x.Host, SandboxPath: x.Inside, ReadOnly: x.ReadOnly})
		}
	}
	return ro, mounts
}
