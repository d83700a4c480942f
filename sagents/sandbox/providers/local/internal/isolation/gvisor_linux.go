//go:build linux

package isolation

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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/bwrapargs"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
)

// gVisor runs each command in a sandbox of its own with a second kernel
// (runsc's Sentry) between the command and the host's: the command's
// system calls never reach the host kernel directly. The contract is
// bwrap's: the same workspace, mounts, environment and limits; the
// host cgroups (created as for bwrap, a little larger for the Sentry's
// own memory and threads) hold runsc and everything it starts, and the
// limits of the command's own processes are rlimits inside gVisor.
const (
	// gvisorMemoryOverhead is added to the host memory cgroup for the
	// Sentry and the gofer; the command's own processes keep RLIMIT_AS.
	gvisorMemoryOverhead = 256 << 20
	// gvisorPidsOverhead is added to the host pids cgroup for the
	// Sentry's and the gofer's threads; inside, RLIMIT_NPROC holds.
	gvisorPidsOverhead = 256
)

// Gvisor runs each command (or a session sandbox's init) in a runsc
// sandbox of its own.
type Gvisor struct {
	runsc     string
	state     string   // runsc --root: the sandboxes' state, in the runtime directory
	stateDir  *os.File // state, opened (O_PATH) when made: close finds runsc's mounts there even if it was moved
	bundles   string   // one OCI bundle per command
	rootfs    string   // the skeleton root
	empty     string   // the file that masks /etc secrets
	hostWS    string
	virtualWS string
	mounts    []driver.VolumeMount
	network   driver.NetworkMode
	limits    limits.Limits
	system    []bwrapargs.SystemPath
	maskFiles []string
	maskDirs  []string
	resolvDir string
	cg        *limits.Cgroups
	egress    *Egress
	uid, gid  uint32
	umaskCmd  string
	prefix    string // container ids: prefix-N
	seq       atomic.Int64
	// stdioControl: the session sandbox's control socket is runsc's stdin
	// (only: gVisor makes each stdio descriptor a file of its own, and
	// closing a stdout on the same socket shut it down), not a descriptor
	// donated with --pass-fd, so that runsc restore can hand it back
	// (SetStdioControl; package local's checkpoint_gvisor_session_linux.go).
	stdioControl bool
}

func newGvisor(ctx context.Context, o Options) (_ Backend, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: isolation gvisor runs runsc as root here (it creates the sandbox's namespaces and cgroups); fix: run sage as root, or use isolation bwrap", driver.ErrIsolationUnavailable)
	}
	runsc, err := FindRunsc(ctx)
	if err != nil {
		return nil, err
	}
	g := &Gvisor{runsc: runsc, hostWS: o.BindWorkspace, virtualWS: o.VirtualWorkspace, mounts: o.Mounts, network: o.Network,
		limits: o.Limits, system: SystemPaths(), egress: o.Egress, umaskCmd: fmt.Sprintf("umask %03o", o.Umask),
		prefix: strings.NewReplacer("/", "-", ":", "-").Replace(o.ID)}
	if g.network == "" {
		g.network = driver.NetworkOff
	}
	if g.network == driver.NetworkOpen {
		g.resolvDir = resolvDir()
		slog.Warn("local sandbox: network is open", "sandbox", o.ID)
	}
	g.uid, g.gid = 65534, 65534
	if o.Ident != nil {
		g.uid, g.gid = uint32(o.Ident.UID), uint32(o.Ident.GID)
	}
	g.maskFiles, g.maskDirs = EtcSecrets()
	dir := filepath.Join(o.RuntimeDir, "gvisor")
	g.state, g.bundles, g.rootfs, g.empty = filepath.Join(dir, "state"), filepath.Join(dir, "bundles"),
		filepath.Join(dir, "rootfs"), filepath.Join(dir, "empty")
	defer func() {
		if err != nil {
			if g.stateDir != nil {
				g.stateDir.Close()
			}
			os.RemoveAll(dir)
		}
	}()
	if err := g.sweep(ctx, dir); err != nil {
		return nil, err
	}
	for _, d := range []string{dir, g.state, g.bundles, g.rootfs} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("local: gvisor: %w", err)
		}
	}
	if fd, err := unix.Open(g.state, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err == nil {
		g.stateDir = os.NewFile(uintptr(fd), g.state)
	} else {
		return nil, fmt.Errorf("local: gvisor: %w", err)
	}
	os.Chmod(g.rootfs, 0o755)
	for _, p := range g.system {
		if p.Symlink != "" {
			os.Remove(filepath.Join(g.rootfs, p.Path))
			if err := os.Symlink(p.Symlink, filepath.Join(g.rootfs, p.Path)); err != nil {
				return nil, fmt.Errorf("local: gvisor root: %w", err)
			}
		}
	}
	if err := os.WriteFile(g.empty, nil, 0o444); err != nil {
		return nil, fmt.Errorf("local: gvisor: %w", err)
	}
	host := o.Limits
	if host.MemoryBytes > 0 {
		host.MemoryBytes += gvisorMemoryOverhead
	}
	if host.Pids > 0 {
		host.Pids += gvisorPidsOverhead
	}
	if g.cg, err = limits.NewCgroups(o.ID, host); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *Gvisor) VirtualWorkspace() string { return g.virtualWS }

// limitsEnforced: the command's processes are counted by gVisor's own
// kernel (RLIMIT_NPROC for a uid that has nothing else there), memory and
// CPU time by the host cgroups around runsc.
func (g *Gvisor) LimitsEnforced() driver.LimitsEnforced {
	return g.limits.Enforced(g.cg, true)
}

func (g *Gvisor) Place(_, preferred string) string { return preferred }

func (g *Gvisor) Kind() string { return driver.IsolationGvisor }

// Close removes the cgroups (killing what is left in them, runsc's
// sandboxes included), then the state of sandboxes runsc did not delete.
func (g *Gvisor) Close() error {
	err := g.cg.Remove()
	ents, _ := os.ReadDir(g.bundles)
	for _, e := range ents {
		g.delete(e.Name())
	}
	// runsc pins an empty network namespace for its gofers by binding it
	// on a file in the state directory; concurrent starts may stack them.
	// The directory is reached through the descriptor opened when it was
	// made: its path may name another directory by now (SAGE_HOME moved
	// away and a new one made at its path), or the mount would stay.
	at := fmt.Sprintf("/proc/self/fd/%d", g.stateDir.Fd())
	for i := 0; i < 64 && unix.Unmount(filepath.Join(at, "null-netns"), unix.MNT_DETACH) == nil; i++ {
	}
	ours := sameDir(g.stateDir, g.state)
	g.stateDir.Close()
	if !ours { // moved or removed: what its path names now is not this sandbox's
		return err
	}
	return errors.Join(err, os.RemoveAll(filepath.Dir(g.state)))
}

// sweep removes what a process killed with -9 left in dir, the gVisor
// directory of this runtime directory (a runtime directory is one
// sandbox's at a time): its containers (runsc delete --force: their
// sandboxes died with runsc, whose parent-death signal the kill sent),
// the network namespace runsc bound in its state, its bundles and its
// checkpoints. Without it the next sandbox's first container id is a
// bundle that exists, and no command runs.
func (g *Gvisor) sweep(ctx context.Context, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ents, _ := os.ReadDir(g.bundles)
	for _, e := range ents {
		if ctx.Err() != nil {
			break
		}
		g.delete(e.Name())
	}
	for i := 0; i < 64 && unix.Unmount(filepath.Join(g.state, "null-netns"), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW) == nil; i++ {
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("local: gvisor: remove what a killed process left in %s: %w; fix: remove it by hand once no runsc uses it", dir, err)
	}
	return nil
}

// sameDir reports whether path still names the directory f was opened
// on.
func sameDir(f *os.File, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(f.Fd()), &a) == nil && unix.Lstat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// GvisorControlFD is the descriptor a session sandbox's supervisor finds
// its control socket at under gVisor: Wrap of a session invocation
// donates the caller's first extra file there (runsc run --pass-fd).
const GvisorControlFD = 3

// RunscFlags are runsc's global flags for a sandbox without network whose
// state is in state (the checkpoint probe's).
func RunscFlags(state string) []string {
	return (&Gvisor{state: state, network: driver.NetworkOff}).flags()
}

// flags are runsc's global flags for this sandbox.
func (g *Gvisor) flags() []string {
	net := "none"
	if g.network == driver.NetworkOpen {
		net = "host"
	}
	f := []string{"--root=" + g.state, "--platform=systrap", "--network=" + net, "--ignore-cgroups", "--oci-seccomp",
		"--overlay2=root:memory", "--host-uds=" + map[bool]string{true: "open", false: "none"}[g.egress != nil]}
	return f
}

func (g *Gvisor) Wrap(inv Invocation) (_ *Wrapped, err error) {
	inv.Argv = withUmask(inv.Argv, g.umaskCmd)
	lim := g.limits
	if inv.Session { // each command's own RLIMIT_CPU and RLIMIT_AS, not the supervisor's (package local's session_gvisor_linux.go)
		lim.CPUTime, lim.MemoryBytes = 0, 0
	}
	asByBridge := g.egress != nil
	if asByBridge { // the bridge (a Go program) sets RLIMIT_AS on the command itself
		inv = g.egress.bridge(inv, lim.MemoryBytes)
	}
	var ro []string
	if g.resolvDir != "" {
		ro = append(ro, g.resolvDir)
	}
	ro, mounts := bindMounts(ro, g.mounts, inv.Binds)
	env := Env(g.virtualWS, inv.Env, inv.Venv)
	spec := GvisorSpec(GvisorOptions{Argv: inv.Argv, Env: env, Chdir: inv.Chdir, UID: g.uid, GID: g.gid,
		RootFS: g.rootfs, System: g.system, Etc: true, MaskFiles: g.maskFiles, MaskDirs: g.maskDirs, Empty: g.empty,
		ReadOnly: ro, Workspace: bwrapargs.VolumeBind{Host: g.hostWS, Inside: g.virtualWS}, Mounts: mounts,
		TmpBytes: g.limits.TmpBytes, ShmBytes: g.limits.ShmBytes, Rlimits: lim.Rlimits(asByBridge), Hostname: "sandbox",
		Caps: inv.Caps})
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("local: gvisor spec: %w", err)
	}
	id, bundle, err := g.newBundle(data)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(bundle)
		}
	}()
	cmd, err := g.cg.Command(lim.CPUTime)
	if err != nil {
		return nil, err
	}
	var own []string
	if cmd != nil {
		own = append(own, cmd.Procs())
	}
	args := append(g.flags(), "run", "--bundle="+bundle, id)
	if inv.Session && !g.stdioControl { // the control socket: the caller's first extra file, the supervisor's fd 3
		args = append(g.flags(), "run", "--pass-fd=3:"+strconv.Itoa(GvisorControlFD), "--bundle="+bundle, id)
	}
	path, argv, err := g.cg.Trampoline(g.runsc, args, own...)
	if err != nil {
		cmd.Release()
		return nil, err
	}
	// runsc runs as root on the host (the command inside as the session's
	// uid); every process it starts is born in the cgroups (trampoline).
	// Without a terminal runsc forwards no signal: SIGTERM goes to every
	// process inside through runsc kill; the SIGKILL that follows kills
	// runsc, and its sandbox dies with it (runsc run is attached).
	return &Wrapped{Path: path, Args: argv, Dir: "/", Env: []string{"PATH=" + SandboxPath},
		Started: func(int) error { return cmd.Start(0) }, Terminate: func() { g.signal(id, "TERM") },
		Done: func() { cmd.Release(); g.delete(id) }, Report: cmd.End, Container: id}, nil
}

// RestoreWrap is Wrap's counterpart for runsc restore: a session sandbox
// started again from the checkpoint image in image, under spec (the
// config.json of the sandbox checkpointed, saved with the image) and a
// new container id, with its control socket on stdin
// (stdioControl); it runs attached, in the cgroups, as runsc run does.
func (g *Gvisor) RestoreWrap(spec []byte, image string) (_ *Wrapped, err error) {
	id, bundle, err := g.newBundle(spec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(bundle)
		}
	}()
	args := append(g.flags(), "restore", "--image-path="+image, "--bundle="+bundle, id)
	path, argv, err := g.cg.Trampoline(g.runsc, args)
	if err != nil {
		return nil, err
	}
	return &Wrapped{Path: path, Args: argv, Dir: "/", Env: []string{"PATH=" + SandboxPath},
		Terminate: func() { g.signal(id, "TERM") }, Done: func() { g.delete(id) }, Container: id}, nil
}

// newBundle makes the OCI bundle of a new container id, with spec as its
// config.json; nothing is left of it on an error.
func (g *Gvisor) newBundle(spec []byte) (id, bundle string, err error) {
	id = fmt.Sprintf("%s-%d", g.prefix, g.seq.Add(1))
	bundle = filepath.Join(g.bundles, id)
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return "", "", fmt.Errorf("local: gvisor bundle: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o600); err != nil {
		os.RemoveAll(bundle)
		return "", "", fmt.Errorf("local: gvisor bundle: %w", err)
	}
	return id, bundle, nil
}

// signal sends sig to every process of a command's sandbox.
func (g *Gvisor) signal(id, sig string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, g.runsc, "--root="+g.state, "kill", "--all", id, sig).CombinedOutput(); err != nil {
		slog.Debug("local sandbox: runsc kill", "id", id, "err", err, "output", string(out))
	}
}

// delete removes what runsc left of a command's sandbox (after a kill)
// and its bundle.
func (g *Gvisor) delete(id string) {
	if left, _ := filepath.Glob(filepath.Join(g.state, id+"*")); len(left) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, g.runsc, "--root="+g.state, "delete", "--force", id).CombinedOutput(); err != nil {
			slog.Debug("local sandbox: runsc delete", "id", id, "err", err, "output", string(out))
		}
	}
	os.RemoveAll(filepath.Join(g.bundles, id))
}

var runscProbe sync.Map // runsc path -> error (nil when it works)

// RunscFix says how to install runsc.
const RunscFix = "fix: install runsc (gVisor): bash .ci/setup.d/50-runsc.sh builds it with Go into ~/.cache/sage and installs /usr/local/bin/runsc, or see https://gvisor.dev/docs/user_guide/install/; run 'sage doctor'"

// FindRunsc finds runsc ($SAGE_RUNSC, else on PATH) and proves, once per
// process, that it can start a sandbox here.
func FindRunsc(ctx context.Context) (string, error) {
	p := os.Getenv("SAGE_RUNSC")
	if p == "" {
		var err error
		if p, err = exec.LookPath("runsc"); err != nil {
			return "", fmt.Errorf("%w: runsc not found on PATH; %s", driver.ErrIsolationUnavailable, RunscFix)
		}
	}
	if v, ok := runscProbe.Load(p); ok {
		if v == nil {
			return p, nil
		}
		return "", v.(error)
	}
	if err := ProbeRunsc(ctx, p); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		runscProbe.Store(p, err)
		return "", err
	}
	runscProbe.Store(p, nil)
	return p, nil
}

// ProbeRunsc runs /bin/true under runsc, with no network and a throwaway
// state directory.
func ProbeRunsc(ctx context.Context, runsc string) error {
	dir, err := os.MkdirTemp("", "sage-runsc-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, runsc, "--root="+dir, "--network=none", "--platform=systrap", "--ignore-cgroups",
		"do", "/bin/true").CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "unknown platform: systrap") {
			// Debian 12's runsc (2022) predates systrap (2023), which
			// sage uses everywhere: install is not the fix, a newer one is.
			v, _ := exec.CommandContext(ctx, runsc, "--version").Output()
			return fmt.Errorf("%w: %s (%s) is too old: it has no --platform=systrap, which gVisor added in 2023; %s",
				driver.ErrIsolationUnavailable, runsc, FirstLines(string(v), 1), RunscNewerFix)
		}
		return fmt.Errorf("%w: %s cannot start a sandbox: %v: %s; %s", driver.ErrIsolationUnavailable, runsc, err,
			FirstLines(string(out), 3), RunscFix)
	}
	return nil
}

// RunscNewerFix says how to replace a runsc too old for sage.
const RunscNewerFix = "fix: install a newer runsc (bash .ci/setup.d/50-runsc.sh builds one with Go and installs /usr/local/bin/runsc, or see https://gvisor.dev/docs/user_guide/install/) and put it first on PATH or name it in SAGE_RUNSC"

// FirstLines are the first n lines of s, joined by "; ".
func FirstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "; ")
}

// GvisorSummary says whether isolation gvisor works here, for sage
// doctor: the runsc it would use and its version, or why not.
//
// Its error names the fix too: run as root, install runsc, or a newer
// one, as the cause is.
func GvisorSummary(ctx context.Context) (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("isolation gvisor runs runsc as root here; sage runs as uid %d; fix: run sage as root to use --isolation gvisor", os.Geteuid())
	}
	p, err := FindRunsc(ctx)
	if err != nil {
		return "", err
	}
	out, _ := exec.CommandContext(ctx, p, "--version").Output()
	return fmt.Sprintf("%s works (%s); --isolation gvisor runs one runsc sandbox per session (the session sandbox, the default: "+
		"its start, about 10x bwrap's, is paid once per session and every command is forked inside it), "+
		"or one per command with fresh_per_command: true", p, FirstLines(string(out), 1)), nil
}
