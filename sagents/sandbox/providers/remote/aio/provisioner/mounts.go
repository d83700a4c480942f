package provisioner

import (
	"fmt"
	"path"
	"strings"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// MountPolicy decides which host paths clients may mount into sandboxes.
// The zero value refuses every extra mount.
type MountPolicy struct {
	// Prefixes are the host directories under which mounts are allowed
	// (absolute, clean). A mount is allowed when its host path is one of
	// them or lies below one.
	Prefixes []string
	// DropUnlisted drops (and logs) mounts outside Prefixes instead of
	// refusing the request with 400.
	DropUnlisted bool
}

// check validates the policy itself.
func (p MountPolicy) check() error {
	for _, pre := range p.Prefixes {
		if !cleanAbs(pre) {
			return fmt.Errorf("provisioner: mount prefix %q: want an absolute, clean path other than /", pre)
		}
	}
	return nil
}

// apply turns the request's mounts into volume mounts: malformed ones are
// an error (wrapping ErrInvalid), unlisted ones an error or dropped.
func (p MountPolicy) apply(ms []wireMount) (kept []driver.VolumeMount, dropped []wireMount, err error) {
	for _, m := range ms {
		if !cleanAbs(m.HostPath) || !cleanAbs(m.ContainerPath) {
			return nil, nil, fmt.Errorf("%w: mount %q -> %q: both paths must be absolute and clean, not /", ErrInvalid, m.HostPath, m.ContainerPath)
		}
		if !p.allowed(m.HostPath) {
			if p.DropUnlisted {
				dropped = append(dropped, m)
				continue
			}
			return nil, nil, fmt.Errorf("%w: mount of host path %q is not allowed by this provisioner (allowed: %s)", ErrInvalid, m.HostPath, p.describe())
		}
		kept = append(kept, driver.VolumeMount{HostPath: m.HostPath, SandboxPath: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	return kept, dropped, nil
}

func (p MountPolicy) allowed(host string) bool {
	for _, pre := range p.Prefixes {
		if host == pre || strings.HasPrefix(host, pre+"/") {
			return true
		}
	}
	return false
}

func (p MountPolicy) describe() string {
	if len(p.Prefixes) == 0 {
		return "none"
	}
	return strings.Join(p.Prefixes, ", ")
}

func cleanAbs(p string) bool {
	return p != "/" && path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsAny(p, "\x00:")
}
