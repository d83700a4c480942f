package hostkit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// PathMapper maps sandbox (virtual) paths to host paths and back, by the
// longest matching mount. The workspace is one of the mounts.
type PathMapper struct {
	workspace string
	mounts    []mapping // longest virtual path first
}

type mapping struct {
	virtual  string
	host     string // absolute, symlinks resolved
	readOnly bool
}

// Location is a resolved sandbox path.
type Location struct {
	Virtual  string // cleaned absolute sandbox path
	Host     string // host path behind it
	Root     string // host directory of the mount that holds it
	Rel      string // slash-separated path inside Root ("." for Root itself)
	Mount    string // virtual path of that mount
	ReadOnly bool
}

// NewPathMapper maps virtualWorkspace to hostWorkspace (read-write) plus
// the extra mounts. Host directories must exist; their symlinks are
// resolved once, here.
func NewPathMapper(virtualWorkspace, hostWorkspace string, mounts []driver.VolumeMount) (*PathMapper, error) {
	if !driver.CleanAbs(virtualWorkspace) {
		return nil, fmt.Errorf("sandbox: virtual workspace %q must be a clean absolute path other than /", virtualWorkspace)
	}
	all := append([]driver.VolumeMount{{HostPath: hostWorkspace, SandboxPath: virtualWorkspace}}, mounts...)
	pm := &PathMapper{workspace: virtualWorkspace}
	seen := map[string]bool{}
	for _, m := range all {
		if !driver.CleanAbs(m.SandboxPath) {
			return nil, fmt.Errorf("sandbox: mount path %q must be a clean absolute path other than /", m.SandboxPath)
		}
		if seen[m.SandboxPath] {
			return nil, fmt.Errorf("sandbox: %q is mounted twice", m.SandboxPath)
		}
		seen[m.SandboxPath] = true
		host, err := filepath.Abs(m.HostPath)
		if err == nil {
			host, err = filepath.EvalSymlinks(host)
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox: mount %s -> %s: %w", m.HostPath, m.SandboxPath, err)
		}
		pm.mounts = append(pm.mounts, mapping{virtual: m.SandboxPath, host: host, readOnly: m.ReadOnly})
	}
	sort.SliceStable(pm.mounts, func(i, j int) bool { return len(pm.mounts[i].virtual) > len(pm.mounts[j].virtual) })
	return pm, nil
}

// Workspace is the virtual workspace path.
func (pm *PathMapper) Workspace() string { return pm.workspace }

// Resolve maps a sandbox path. Relative paths start at the workspace; ".."
// is resolved lexically and may not leave the sandbox's mounts.
func (pm *PathMapper) Resolve(p string) (Location, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return Location{}, driver.NewPathError("resolve", p, driver.ErrBadPath, "contains a NUL byte")
	}
	v := p
	if !path.IsAbs(v) {
		v = path.Join(pm.workspace, v)
	}
	v = path.Clean(v)
	for _, m := range pm.mounts {
		if v != m.virtual && !strings.HasPrefix(v, m.virtual+"/") {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(v, m.virtual), "/")
		if rel == "" {
			rel = "."
		}
		return Location{
			Virtual: v, Host: filepath.Join(m.host, filepath.FromSlash(rel)),
			Root: m.host, Rel: rel, Mount: m.virtual, ReadOnly: m.readOnly,
		}, nil
	}
	return Location{}, driver.NewPathError("resolve", p, driver.ErrEscape, "outside the sandbox's workspace and mounts")
}

// ToHost maps a sandbox path to its host path.
func (pm *PathMapper) ToHost(p string) (string, error) {
	loc, err := pm.Resolve(p)
	return loc.Host, err
}

// ToVirtual maps an absolute host path to the sandbox path that shows it.
func (pm *PathMapper) ToVirtual(hostPath string) (string, error) {
	if !filepath.IsAbs(hostPath) {
		return "", driver.NewPathError("to_virtual", hostPath, driver.ErrBadPath, "host path must be absolute")
	}
	clean := filepath.Clean(hostPath)
	if v, ok := pm.toVirtual(clean); ok {
		return v, nil
	}
	// The host path may reach a mount through a symlink (/tmp on macOS).
	if real, err := filepath.EvalSymlinks(clean); err == nil {
		if v, ok := pm.toVirtual(real); ok {
			return v, nil
		}
	}
	return "", driver.NewPathError("to_virtual", hostPath, driver.ErrEscape, "not inside the workspace or a mount")
}

func (pm *PathMapper) toVirtual(host string) (string, bool) {
	best, bestLen := "", -1
	for _, m := range pm.mounts {
		if host != m.host && !strings.HasPrefix(host, m.host+string(filepath.Separator)) {
			continue
		}
		if len(m.host) > bestLen {
			rel := filepath.ToSlash(strings.TrimPrefix(host, m.host))
			best, bestLen = path.Clean(m.virtual+"/"+rel), len(m.host)
		}
	}
	return best, bestLen >= 0
}

// Mounts lists the extra mounts (not the workspace) as configured, with
// resolved host paths.
func (pm *PathMapper) Mounts() []driver.VolumeMount {
	var out []driver.VolumeMount
	for _, m := range pm.mounts {
		if m.virtual != pm.workspace {
			out = append(out, driver.VolumeMount{HostPath: m.host, SandboxPath: m.virtual, ReadOnly: m.readOnly})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SandboxPath < out[j].SandboxPath })
	return out
}

// rootEscape is the error value os.Root returns for a path that leaves
// the root. Package os does not export it, so it is taken once from
// os.Root itself (a ".." at the root always escapes), and escapes are
// then found with errors.Is, never by reading error text.
var rootEscape = sync.OnceValue(func() error {
	r, err := os.OpenRoot(os.TempDir())
	if err != nil {
		if r, err = os.OpenRoot("/"); err != nil {
			return nil
		}
	}
	defer r.Close()
	_, err = r.Lstat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return nil
})

// mapFSError turns os.Root errors into the package's contract: escapes
// become *fs.PathError wrapping ErrEscape (so fs.ErrPermission) and host
// paths are replaced by the sandbox path the caller gave.
func mapFSError(op string, loc Location, err error) error {
	if err == nil {
		return nil
	}
	if esc := rootEscape(); esc != nil && errors.Is(err, esc) {
		return driver.NewPathError(op, loc.Virtual, driver.ErrEscape, "escapes its mount (through a symlink or ..)")
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: op, Path: loc.Virtual, Err: pe.Err}
	}
	return err
}

// WithWorkspaceRoot is a copy of pm whose workspace is reached through
// root, taken as it is (no symlink resolved): a path such as
// /proc/self/fd/N, a descriptor the driver keeps pointing at the live
// workspace (local mode's checkpoints).
func (pm *PathMapper) WithWorkspaceRoot(root string) *PathMapper {
	out := &PathMapper{workspace: pm.workspace, mounts: append([]mapping{}, pm.mounts...)}
	for i := range out.mounts {
		if out.mounts[i].virtual == pm.workspace {
			out.mounts[i].host = root
		}
	}
	return out
}
