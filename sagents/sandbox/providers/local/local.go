package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/quota"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

func init() { driver.Register(driver.Local, New) }

// DefaultVirtualWorkspace is where the workspace appears inside the
// sandbox on Linux.
const DefaultVirtualWorkspace = "/workspace"

// Sandbox is the local-mode driver.
type Sandbox struct {
	*hostkit.HostFS
	id         string
	hostWS     string
	timeout    time.Duration
	runtimeDir string
	ownRuntime bool
	limits     Limits
	ident      *uids.Identity // the host uid commands run as; nil: the caller's own
	umask      fs.FileMode    // inside
	iso        isolation.Backend
	egress     *egressProxy // network allowlist only
	network    driver.NetworkMode
	quota      *quota.Disk // the workspace's own file system; nil: none
	*hostkit.Background
	py pythonEnv
	// bgCPU: background task id -> *bgLimit (how a task's CPU budget ended)
	bgCPU sync.Map
	sess  sessionSlot  // the session sandbox, when enabled
	ckpt  *checkpoints // the workspace's layers (checkpoints on); nil: off
	// gckpt: checkpoints of a gVisor session (runsc checkpoint images and
	// workspace copies; checkpoint_gvisor_session_linux.go); nil: off.
	gckpt *gvisorCheckpoints
	// forkIn: a fork's hold on its parent's layers; forks: the forks of
	// this one and its pool (fork.go).
	forkIn *forkIn
	forks  forkSide

	closeOnce sync.Once
	closeErr  error

	// bindWS is the host path the isolation binds as the workspace:
	// hostWS, or the idmapped mount of it (idmap_linux.go).
	bindWS string
	idmap  *uids.IdmappedMount // the workspace's idmapped mount; nil: none

	// runtimeLock is held (flock) while an own runtime directory exists
	// (sweep_linux.go); nil: none.
	runtimeLock *os.File
}

// An invocation is one command to run inside the sandbox, a bind a host
// path shown inside, and wrapped the host process that runs an
// invocation under the sandbox's isolation backend (iso), which package
// internal/isolation makes (backend.go wires it).
type (
	invocation = isolation.Invocation
	bind       = isolation.Bind
	wrapped    = isolation.Wrapped
)

// New creates a local sandbox. It fails, naming the cause and the fix,
// when the isolation or a limit cannot be enforced on this machine.
func New(ctx context.Context, cfg driver.Config) (driver.Driver, error) {
	s, err := NewWithOptions(ctx, cfg, Options{})
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

// NewWithOptions is New with what a config cannot say: the egress
// observer and resolver of network allowlist. With allowlist it starts
// the sandbox's filtering proxies; Close stops them.
func NewWithOptions(ctx context.Context, cfg driver.Config, opts Options) (_ *Sandbox, err error) {
	if cfg.Workspace == "" {
		return nil, &driver.ConfigError{Field: "sandbox.workspace", Reason: "required in local mode"}
	}
	var id *uids.Identity
	asRoot := switchUID && os.Geteuid() == 0 && usesBwrap(cfg)
	ws, err := prepareWorkspace(cfg.Workspace, asRoot)
	if err != nil {
		return nil, err
	}
	if home := resolvedHome(); within(ws, home) {
		return nil, &driver.ConfigError{Field: "sandbox.workspace", Value: cfg.Workspace,
			Reason: fmt.Sprintf("covers SAGE_HOME (%s), which holds the session daemons' sockets and keys and every session's files; fix: use a workspace beside it (the default is SAGE_HOME/sessions/NAME/workspace)", home)}
	}
	if asRoot && opts.fork != nil {
		id = opts.fork.ident // a fork runs as its parent's uid: the layers it stands on are that uid's
	} else if asRoot {
		if id, err = uids.ForSession(cfg.Local.UIDRange, ws); err != nil {
			return nil, err
		}
		if id.Idmapped() {
			uids.SweepIdmapped(sagehome.Dir()) // mounts left by sandboxes killed with theirs
		} else if err := uids.Reachable(ws, id, uids.NeedRead|uids.NeedWrite|uids.NeedExec); err != nil {
			return nil, fmt.Errorf("local: workspace %s: bwrap runs as the session's uid %d and cannot reach it: %w; %s", ws, id.UID, err, uids.ReachFix(ws, err))
		}
	}
	if !opts.Session.Enabled && sessionByConfig(cfg) {
		opts.Session = SessionOptions{Enabled: true, IdleTimeout: cfg.Local.IdleTimeout, Prestart: cfg.Local.Prestart,
			Supervisor: opts.Session.Supervisor}
	}
	if err := checkSession(cfg, opts.Session); err != nil {
		return nil, err
	}
	disk, err := quota.Setup(cfg, ws, id)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			disk.Abandon()
		}
	}()
	if cfg.Mounts, err = checkMounts(cfg, ws, id); err != nil {
		return nil, err
	}
	umask, _ := driver.ParseUmask(cmp.Or(cfg.Local.Umask, DefaultUmask))
	s := &Sandbox{id: cfg.SandboxID, hostWS: ws, bindWS: ws, timeout: cfg.Timeout, runtimeDir: cfg.RuntimeDir,
		limits: ResolveLimits(cfg.Local), ident: id, umask: umask, quota: disk,
		network: cmp.Or(cfg.Local.Network, driver.NetworkOff)}
	if s.id == "" {
		s.id = driver.NewID("local")
		s.ownRuntime = cfg.RuntimeDir == ""
	}
	root := filepath.Join(sagehome.Dir(), "runtime")
	if s.runtimeDir == "" {
		s.runtimeDir = filepath.Join(root, s.id)
	}
	// What processes killed with -9 left (sweep_linux.go): once per
	// process and directory, one ReadDir when there is nothing.
	sweep(root, true)
	sweep(filepath.Dir(s.runtimeDir), false) // the layers set aside beside it
	if s.ownRuntime {
		// Locked before it exists, until after it is removed: a sweep
		// removes it once its process is gone.
		if err := makeParents(s.runtimeDir, id != nil); err != nil {
			return nil, fmt.Errorf("local: runtime dir: %w", err)
		}
		if err := s.lockOwnRuntime(); err != nil {
			return nil, fmt.Errorf("local: runtime dir: %w", err)
		}
	}
	if err := makePrivateDir(s.runtimeDir, id); err != nil {
		s.removeOwnRuntime()
		return nil, fmt.Errorf("local: runtime dir: %w", err)
	}
	if id.Idmapped() {
		if s.idmap, err = uids.MountIdmapped(ws, s.runtimeDir, id); err != nil {
			s.removeOwnRuntime()
			return nil, err
		}
		s.bindWS = s.idmap.Staging
		if err := uids.Reachable(s.bindWS, id, uids.NeedRead|uids.NeedWrite|uids.NeedExec); err != nil {
			s.idmap.Release()
			s.removeOwnRuntime()
			return nil, fmt.Errorf("local: workspace %s: the sandbox's uid %d cannot use its idmapped mount %s (the folder's owner has no rwx on it): %w; fix: chmod u+rwx %s",
				ws, id.UID, s.bindWS, err, ws)
		}
	}
	if cfg.Local.Network == driver.NetworkAllowlist {
		if s.egress, err = startEgress(cfg, opts, s); err != nil {
			s.idmap.Release()
			s.removeOwnRuntime()
			return nil, err
		}
	}
	s.sess.opts = opts.Session // the backend sizes the session sandbox's pids cgroup by it
	if s.iso, err = newBackend(ctx, cfg, s); err != nil {
		s.egress.close()
		s.idmap.Release()
		s.removeOwnRuntime()
		return nil, err
	}
	mapper, err := hostkit.NewPathMapper(s.iso.VirtualWorkspace(), ws, cfg.Mounts)
	if err != nil {
		s.iso.Close()
		s.egress.close()
		s.idmap.Release()
		s.removeOwnRuntime()
		return nil, fmt.Errorf("local: %w", err)
	}
	s.HostFS = &hostkit.HostFS{Mapper: mapper, Owner: id.Owner()}
	s.forkIn, s.forks.size, s.forks.cfg, s.forks.opts = opts.fork, opts.ForkPool, cfg, opts.Session
	s.Background = hostkit.NewBackground(filepath.Join(s.runtimeDir, "background"), 0)
	s.py = pythonEnv{dir: s.runtimeDir}
	s.sess.opts = opts.Session
	if err := s.setupCheckpoints(cfg); err != nil {
		s.iso.Close()
		s.egress.close()
		s.idmap.Release()
		s.removeOwnRuntime()
		return nil, err
	}
	s.prestartSession()
	if opts.ForkPool > 0 && s.ckpt != nil {
		s.refill()
	}
	return s, nil
}

func prepareWorkspace(p string, asRoot bool) (string, error) {
	ws, err := filepath.Abs(p)
	if err == nil {
		err = makeDirs(ws, asRoot)
	}
	if err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return "", fmt.Errorf("local: workspace: %w", err)
	}
	return ws, nil
}

// ID is the sandbox id.
func (s *Sandbox) ID() string { return s.id }

// HostWorkspacePath is the workspace on the host.
func (s *Sandbox) HostWorkspacePath() string { return s.hostWS }

// Limits are the limits every command of this sandbox runs under.
func (s *Sandbox) Limits() Limits { return s.limits }

// Close kills background tasks, releases the sandbox's cgroups, stops
// its egress proxies and unmounts the workspace's quota file system; for
// an anonymous sandbox it also removes the runtime directory and the
// quota image (and the lock that kept its runtime directory from a
// sweep). Idempotent.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closeFork(ctx)               // the pool's sandboxes; a fork's session started, to write its files back
		err := s.Background.Close(ctx) // first: tasks in the session get their SIGTERM
		s.stopSession()
		if cerr := s.closeCheckpoints(); err == nil { // writes the live state back
			err = cerr
		}
		if cerr := s.iso.Close(); err == nil {
			err = cerr
		}
		if eerr := s.egress.close(); err == nil {
			err = eerr
		}
		if qerr := s.quota.Release(); err == nil {
			err = qerr
		}
		if ierr := s.idmap.Release(); err == nil { // after the isolation: nothing binds it any more
			err = ierr
		}
		s.closeForkEnd()
		if s.ownRuntime {
			evacuate(s.runtimeDir) // layers forks stand on outlive it
			if rerr := s.removeOwnRuntime(); err == nil && rerr != nil {
				err = fmt.Errorf("local: remove runtime dir: %w", rerr)
			}
		}
		s.closeErr = err
	})
	return s.closeErr
}

var (
	_ driver.Driver           = (*Sandbox)(nil)
	_ driver.BackgroundRunner = (*Sandbox)(nil)
	_ driver.HostPather       = (*Sandbox)(nil)
	_ driver.PythonRunner     = (*Sandbox)(nil)
	_ driver.JavaScriptRunner = (*Sandbox)(nil)
	_ driver.TreeWalker       = (*Sandbox)(nil)
	_ driver.HostCopier       = (*Sandbox)(nil)
)

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// RuntimeDir is the host directory with the session's venv, code files
// and background logs.
func (s *Sandbox) RuntimeDir() string { return s.runtimeDir }

// checkMounts resolves the mounts' host paths once and refuses mounts that
// would hide the workspace or a system mount, host paths the sandbox
// itself could swap for a symlink between commands (inside the workspace
// or a read-write mount), and, read-only or not, host paths that cover
// SAGE_HOME or lie inside it outside a session's workspace: a session
// daemon's socket accepts a connect on a read-only bind mount, and
// SAGE_HOME holds other secrets (sandboxd's token).
func checkMounts(cfg driver.Config, ws string, id *uids.Identity) ([]driver.VolumeMount, error) {
	home := resolvedHome()
	virtual := cfg.VirtualWorkspace
	if virtual == "" {
		virtual = DefaultVirtualWorkspace
	}
	out := make([]driver.VolumeMount, len(cfg.Mounts))
	for i, m := range cfg.Mounts {
		field := fmt.Sprintf("sandbox.mounts[%d]", i)
		host, err := filepath.EvalSymlinks(m.HostPath)
		if err != nil {
			return nil, &driver.ConfigError{Field: field + ".host_path", Value: m.HostPath, Reason: err.Error()}
		}
		out[i] = driver.VolumeMount{HostPath: host, SandboxPath: m.SandboxPath, ReadOnly: m.ReadOnly}
		if within(m.SandboxPath, virtual) || within("/proc", m.SandboxPath) || within("/dev", m.SandboxPath) ||
			within("/run/sage", m.SandboxPath) {
			return nil, &driver.ConfigError{Field: field + ".sandbox_path", Value: m.SandboxPath,
				Reason: "would hide the workspace or a mount the sandbox needs"}
		}
		if within(ws, host) {
			return nil, &driver.ConfigError{Field: field + ".host_path", Value: m.HostPath, Reason: "is inside the workspace"}
		}
		if mountsCheckHome {
			if err := homeMount(home, host); err != "" {
				return nil, &driver.ConfigError{Field: field + ".host_path", Value: m.HostPath, Reason: err}
			}
		}
		if !m.ReadOnly && within(host, ws) {
			// From inside, a command could swap its own workspace for a
			// symlink to any host directory.
			return nil, &driver.ConfigError{Field: field + ".host_path", Value: m.HostPath,
				Reason: "holds the workspace and is read-write; mount it read-only or mount a directory beside it"}
		}
		need := uint32(uids.NeedRead | uids.NeedExec)
		if !m.ReadOnly {
			need |= uids.NeedWrite
		}
		if fi, err := os.Stat(host); err == nil && !fi.IsDir() {
			need &^= uids.NeedExec
		}
		if err := uids.Reachable(host, id, need); err != nil {
			return nil, &driver.ConfigError{Field: field + ".host_path", Value: m.HostPath,
				Reason: fmt.Sprintf("the sandbox runs as uid %d, which cannot use it: %v; fix: chown/chmod it for that uid, or mount it read-only", id.UID, err)}
		}
	}
	for i, m := range out {
		for j, o := range out {
			if i != j && !o.ReadOnly && within(o.HostPath, m.HostPath) && m.HostPath != o.HostPath {
				return nil, &driver.ConfigError{Field: fmt.Sprintf("sandbox.mounts[%d].host_path", i), Value: m.HostPath,
					Reason: "is inside the read-write mount " + o.HostPath}
			}
		}
	}
	return out, nil
}

// homeMount says why a mount of host may not be made, given SAGE_HOME:
// it covers SAGE_HOME, or lies inside it outside every session's
// workspace (SAGE_HOME/sessions/NAME/workspace); "" when it may.
func homeMount(home, host string) string {
	switch {
	case home == "":
	case within(host, home):
		return fmt.Sprintf("covers SAGE_HOME (%s), where the session daemons' sockets and keys live (a socket on a read-only mount still accepts a connect); fix: mount a directory beside it", home)
	case within(home, host):
		rel, _ := filepath.Rel(home, host)
		if parts := strings.Split(rel, string(filepath.Separator)); len(parts) >= 3 && parts[0] == "sessions" && parts[2] == "workspace" {
			return ""
		}
		return fmt.Sprintf("is inside SAGE_HOME (%s), which holds the session daemons' sockets and keys; only a session's workspace (SAGE_HOME/sessions/NAME/workspace) may be mounted from it", home)
	}
	return ""
}

// resolvedHome is SAGE_HOME as an absolute path without symlinks (as the
// mounts' host paths are), or as given while it does not exist yet.
func resolvedHome() string {
	home, err := filepath.Abs(sagehome.Dir())
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(home); err == nil {
		return real
	}
	return home
}

// mountsCheckHome is switched off only by a red-team test's control.
var mountsCheckHome = true

// switchUID is switched off only by a red-team test's control (commands
// then run as host root, as they did before).
var switchUID = true

// DefaultUmask is the file mode creation mask inside the sandbox.
const DefaultUmask = "077"

// usesBwrap reports whether cfg isolates with bubblewrap on this OS.
func usesBwrap(cfg driver.Config) bool {
	return runtime.GOOS == "linux" && cfg.Local.Isolation.Linux != driver.IsolationNone
}

// makeDirs creates p (0700) and its missing parents: 0700 too, or, as
// root, 0711 (searchable, not listable) since each session's own uid must
// pass through them to its workspace. Parents inside SAGE_HOME that a
// session uid could not pass through are opened for search.
func makeDirs(p string, asRoot bool) error {
	if err := makeParents(p, asRoot); err != nil {
		return err
	}
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// makeParents creates p's missing parents as makeDirs does.
func makeParents(p string, asRoot bool) error {
	parentMode := fs.FileMode(0o700)
	if asRoot {
		parentMode = 0o711
	}
	if err := os.MkdirAll(filepath.Dir(p), parentMode); err != nil {
		return err
	}
	if asRoot {
		home := filepath.Clean(sagehome.Dir())
		for dir := filepath.Dir(p); within(home, dir); dir = filepath.Dir(dir) {
			if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o001 == 0 && fi.Sys().(*syscall.Stat_t).Uid == 0 {
				os.Chmod(dir, fi.Mode().Perm()|0o011)
			}
			if dir == home {
				break
			}
		}
	}
	return nil
}

// makePrivateDir creates a runtime directory: 0700, or, for a session uid,
// root's and 0711.
func makePrivateDir(p string, id *uids.Identity) error {
	if err := makeDirs(p, id != nil); err != nil {
		return err
	}
	if id == nil {
		return nil
	}
	// Root's, searchable by the session uid (bwrap binds the venv, code
	// and proxy directories inside it by path) but not writable by it:
	// root later opens names in it (background logs, the venv lock), which
	// the session must not be able to swap for symlinks. Only the venv
	// and the proxy sockets are the session's.
	if err := os.Lchown(p, 0, 0); err != nil {
		return err
	}
	if err := os.Chmod(p, 0o711); err != nil {
		return err
	}
	if err := uids.Reachable(p, id, uids.NeedExec); err != nil {
		return fmt.Errorf("bwrap runs as the session's uid %d and cannot reach it: %w; fix: put it under a directory others may search", id.UID, err)
	}
	return nil
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
