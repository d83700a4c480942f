package bwrapargs

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// SystemPath is a system directory bound read-only into the sandbox, or,
// when Symlink is set, a symlink recreated inside (merged-/usr systems
// have /bin -> usr/bin).
type SystemPath struct {
	Path    string
	Symlink string
}

// Options is everything Args needs; it holds no machine state,
// so the argument list is a pure function of it.
type Options struct {
	Network   bool              // share the host network (network: open; allowlist keeps the empty namespace)
	Env       map[string]string // the whole environment inside
	System    []SystemPath      // /usr, /bin, /lib*, ... as found on the host
	Etc       bool              // bind /etc read-only
	MaskFiles []string          // secret files hidden behind /dev/null
	MaskDirs  []string          // secret directories hidden behind an empty tmpfs
	ReadOnly  []string          // extra host paths shown read-only at the same path
	TmpBytes  int64             // size of the private /tmp; 0 means bwrap's default
	ShmBytes  int64             // size of /dev/shm; 0 means bwrap's default
	Workspace VolumeBind        // the workspace, read-write
	Mounts    []driver.VolumeMount
	Chdir     string // working directory inside
	InfoFD    int    // --info-fd; 0 means none
	BlockFD   int    // --block-fd; 0 means none
	// WorkspaceFD, when > 0, binds the workspace from this descriptor
	// (--bind-fd) instead of by path: sage opened it without following
	// symlinks, so a workspace swapped for a symlink is never bound.
	WorkspaceFD int
	// SeccompFD, when > 0, loads the seccomp filter from it (--seccomp).
	SeccompFD int
	// MapRoot shows the sandbox's uid as 0 inside (--uid 0 --gid 0); bwrap
	// runs as the session's unprivileged host uid, which is what uid 0
	// inside is on the host.
	MapRoot bool
	// AsPID1 runs the command as the sandbox's pid 1 (--as-pid-1), with no
	// init of bwrap's in the sandbox: the session sandbox's supervisor is
	// its own init (it reaps every orphan), and no process of bwrap's,
	// dumpable and holding bwrap's stdio, is left where commands run.
	AsPID1 bool
}

// VolumeBind binds a host path at a path inside.
type VolumeBind struct{ Host, Inside string }

// Args builds the bwrap argument list (without the bwrap binary
// itself and without the command). The order is fixed, and later mounts
// win over earlier ones:
//
//  1. namespaces: --unshare-all --unshare-user [--share-net] [--uid 0
//     --gid 0] --disable-userns
//     (network allowlist adds no flag here: the bridge and the proxy
//     sockets arrive as read-only mounts in step 10)
//  2. lifetime: --die-with-parent --new-session [--as-pid-1] [--info-fd N]
//     [--block-fd N]
//  3. environment: --clearenv, then --setenv for each variable, sorted
//  4. --cap-drop ALL
//  5. system directories read-only (or recreated symlinks)
//  6. /etc read-only, then its secrets masked
//  7. --proc /proc --dev /dev, a size-bounded /dev/shm, then /dev read-only
//  8. a private /tmp (tmpfs, size-bounded)
//  9. extra read-only paths (interpreters outside /usr)
//  10. the workspace read-write (--bind-fd when opened by sage), then the
//     mounts, shallowest first
//     (--ro-bind for read-only ones): after /tmp, so none is hidden
//  11. --remount-ro / (bwrap's own root tmpfs: nothing is writable but
//     /tmp, /dev/shm, the workspace and read-write mounts; tmpfs pages are
//     not counted by RLIMIT_AS, so none may be unbounded)
//  12. --chdir
//  13. [--seccomp N]
func Args(o Options) []string {
	a := []string{"--unshare-all", "--unshare-user"}
	if o.Network {
		a = append(a, "--share-net")
	}
	if o.MapRoot {
		a = append(a, "--uid", "0", "--gid", "0")
	}
	a = append(a, "--disable-userns", "--die-with-parent", "--new-session")
	if o.AsPID1 {
		a = append(a, "--as-pid-1")
	}
	if o.InfoFD > 0 {
		a = append(a, "--info-fd", strconv.Itoa(o.InfoFD))
	}
	if o.BlockFD > 0 {
		a = append(a, "--block-fd", strconv.Itoa(o.BlockFD))
	}
	a = append(a, "--clearenv")
	for _, k := range slices.Sorted(maps.Keys(o.Env)) {
		a = append(a, "--setenv", k, o.Env[k])
	}
	a = append(a, "--cap-drop", "ALL")
	for _, p := range o.System {
		if p.Symlink != "" {
			a = append(a, "--symlink", p.Symlink, p.Path)
		} else {
			a = append(a, "--ro-bind", p.Path, p.Path)
		}
	}
	if o.Etc {
		a = append(a, "--ro-bind", "/etc", "/etc")
		for _, f := range o.MaskFiles {
			a = append(a, "--ro-bind", "/dev/null", f)
		}
		for _, d := range o.MaskDirs {
			a = append(a, "--tmpfs", d, "--remount-ro", d)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	a = append(a, sized(o.ShmBytes, "/dev/shm")...)
	a = append(a, "--remount-ro", "/dev")
	a = append(a, sized(o.TmpBytes, "/tmp")...)
	for _, p := range o.ReadOnly {
		a = append(a, "--ro-bind", p, p)
	}
	if o.WorkspaceFD > 0 {
		a = append(a, "--bind-fd", strconv.Itoa(o.WorkspaceFD), o.Workspace.Inside)
	} else {
		a = append(a, "--bind", o.Workspace.Host, o.Workspace.Inside)
	}
	for _, m := range shallowFirst(o.Mounts) {
		flag := "--bind"
		if m.ReadOnly {
			flag = "--ro-bind"
		}
		a = append(a, flag, m.HostPath, m.SandboxPath)
	}
	a = append(a, "--remount-ro", "/", "--chdir", o.Chdir)
	if o.SeccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(o.SeccompFD))
	}
	return a
}

// sized is a size-bounded tmpfs (size 0: bwrap's default).
func sized(bytes int64, path string) []string {
	if bytes <= 0 {
		return []string{"--tmpfs", path}
	}
	return []string{"--size", strconv.FormatInt(bytes, 10), "--tmpfs", path}
}

// shallowFirst orders mounts so a mount never hides one below it.
func shallowFirst(ms []driver.VolumeMount) []driver.VolumeMount {
	out := append([]driver.VolumeMount{}, ms...)
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i].SandboxPath, "/") < strings.Count(out[j].SandboxPath, "/")
	})
	return out
}
