//go:build !linux

package uids

import "errors"

// IdmappedMount: idmapped workspaces are Linux's (idmap_linux.go).
type IdmappedMount struct{ Staging string }

// Release: there is no mount to release.
func (m *IdmappedMount) Release() error { return nil }

// MountIdmapped: there is no idmapped mount off Linux (nil).
func MountIdmapped(string, string, *Identity) (*IdmappedMount, error) { return nil, nil }

// SweepIdmapped: there are no mounts to sweep off Linux.
func SweepIdmapped(string) {}

// IdmapSummary: idmapped workspaces are Linux's.
func IdmapSummary(string) (string, error) {
	return "", errors.New("idmapped workspaces need Linux")
}
