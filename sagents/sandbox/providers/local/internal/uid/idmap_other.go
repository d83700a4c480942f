//go:build !linux

package local

import "errors"

// idmapped workspaces are Linux's (idmap_linux.go).
type idmapped struct{ staging string }

func (m *idmapped) release() error { return nil }

func mountIdmapped(string, string, *identity) (*idmapped, error) { return nil, nil }

func sweepIdmapped(string) {}

// IdmapSummary: idmapped workspaces are Linux's.
func IdmapSummary(string) (string, error) {
	return "", errors.New("idmapped workspaces need Linux")
}
