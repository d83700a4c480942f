package isolation

import (
	"path"
	"slices"
	"sort"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/bwrapargs"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/limits"
)

// GvisorOptions is everything GvisorSpec needs; like BwrapOptions it holds
// no machine state, so the spec is a pure function of it.
type GvisorOptions struct {
	Argv      []string
	Env       map[string]string
	Chdir     string // working directory inside
	UID, GID  uint32 // the command's user inside (never 0: gVisor enforces RLIMIT_NPROC only without capabilities)
	RootFS    string // an empty, root-owned skeleton directory (symlinks of the system paths only)
	System    []bwrapargs.SystemPath
	Etc       bool
	MaskFiles []string // under /etc: shown as an empty file
	MaskDirs  []string // under /etc: shown as an empty directory
	Empty     string   // host path of the empty, read-only file behind MaskFiles
	ReadOnly  []string // extra host paths bound read-only at the same path
	Workspace bwrapargs.VolumeBind
	Mounts    []driver.VolumeMount
	TmpBytes  int64
	ShmBytes  int64
	Rlimits   []limits.Rlimit
	Hostname  string
	// Caps are the capabilities of the sandbox's first process (in every
	// set, ambient included, so an exec keeps them): none for a command,
	// a few for a session's supervisor (Invocation.Caps), which keeps them
	// from the commands (supervisor/tag_linux.go).
	Caps []string
}

// GvisorSpec builds the OCI runtime spec runsc runs: a root of its own
// (system directories and /etc bound read-only, /etc secrets masked), the
// workspace and mounts bound, a private size-bounded /tmp and /dev/shm,
// no capabilities, no new privileges, the limits as rlimits. Mounts are
// in the order that makes later ones cover earlier ones.
func GvisorSpec(o GvisorOptions) *specs.Spec {
	env := make([]string, 0, len(o.Env))
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	rl := make([]specs.POSIXRlimit, 0, len(o.Rlimits))
	for _, r := range o.Rlimits {
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_" + rlimitName(r.Resource), Soft: r.Soft, Hard: r.Max})
	}
	ro := []string{"rbind", "ro", "nosuid", "nodev"}
	rw := []string{"rbind", "rw", "nosuid", "nodev"}
	m := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: sizeOpt([]string{"nosuid", "noexec", "nodev", "mode=1777"}, o.ShmBytes)},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: sizeOpt([]string{"nosuid", "nodev", "mode=1777"}, o.TmpBytes)},
	}
	for _, p := range o.System {
		if p.Symlink == "" { // symlinks are in the skeleton root
			m = append(m, specs.Mount{Destination: p.Path, Type: "bind", Source: p.Path, Options: ro})
		}
	}
	if o.Etc {
		m = append(m, specs.Mount{Destination: "/etc", Type: "bind", Source: "/etc", Options: ro})
		for _, f := range o.MaskFiles {
			m = append(m, specs.Mount{Destination: f, Type: "bind", Source: o.Empty, Options: ro})
		}
		for _, d := range o.MaskDirs {
			m = append(m, specs.Mount{Destination: d, Type: "tmpfs", Source: "tmpfs", Options: []string{"ro", "nosuid", "nodev", "size=4k", "mode=755"}})
		}
	}
	for _, p := range o.ReadOnly {
		m = append(m, specs.Mount{Destination: p, Type: "bind", Source: p, Options: ro})
	}
	m = append(m, specs.Mount{Destination: o.Workspace.Inside, Type: "bind", Source: o.Workspace.Host, Options: rw})
	binds := slices.Clone(o.Mounts)
	sort.SliceStable(binds, func(i, j int) bool { return depth(binds[i].SandboxPath) < depth(binds[j].SandboxPath) })
	for _, b := range binds {
		opts := rw
		if b.ReadOnly {
			opts = ro
		}
		m = append(m, specs.Mount{Destination: b.SandboxPath, Type: "bind", Source: b.HostPath, Options: opts})
	}
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: o.Hostname,
		Root:     &specs.Root{Path: o.RootFS, Readonly: true},
		Process: &specs.Process{
			Args: o.Argv, Env: env, Cwd: o.Chdir,
			User: specs.User{UID: o.UID, GID: o.GID},
			Capabilities: &specs.LinuxCapabilities{Bounding: o.Caps, Effective: o.Caps, Permitted: o.Caps,
				Inheritable: o.Caps, Ambient: o.Caps},
			NoNewPrivileges: true,
			Rlimits:         rl,
		},
		Mounts: m,
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
			MaskedPaths:   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"},
			Seccomp:       gvisorSeccomp(),
		},
	}
}

// gvisorSeccomp keeps commands from making namespaces inside gVisor's
// kernel, as the bwrap filter does on the host's: unshare and setns fail
// with EPERM, and so does clone with any namespace flag (one rule per
// flag: OCI rules compare under a mask for equality only). runsc applies
// it with --oci-seccomp.
func gvisorSeccomp() *specs.LinuxSeccomp {
	eperm := uint(1) // EPERM
	rules := []specs.LinuxSyscall{{Names: []string{"unshare", "setns"}, Action: specs.ActErrno, ErrnoRet: &eperm}}
	for _, flag := range []uint64{0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000} {
		rules = append(rules, specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}}})
	}
	return &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: rules}
}

func sizeOpt(opts []string, n int64) []string {
	if n > 0 {
		opts = append(opts, "size="+strconv.FormatInt(n, 10))
	}
	return opts
}

func depth(p string) int {
	n := 0
	for p = path.Clean(p); p != "/" && p != "."; p = path.Dir(p) {
		n++
	}
	return n
}

// rlimitName names an RLIMIT_* number as the OCI spec does.
func rlimitName(resource int) string {
	switch resource {
	case limits.RlimitCPU:
		return "CPU"
	case limits.RlimitFsize:
		return "FSIZE"
	case limits.RlimitCore:
		return "CORE"
	case limits.RlimitNproc:
		return "NPROC"
	case limits.RlimitAS:
		return "AS"
	}
	return strconv.Itoa(resource)
}
