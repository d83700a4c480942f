// Package sagehome locates SAGE_HOME, the directory of sage's state
// (runtime directories, caches, tokens), for every package that keeps
// some; sandbox.Home is its public face.
package sagehome

import (
	"os"
	"path/filepath"
)

// Root is the default SAGE_HOME of root.
const Root = "/var/lib/sage"

// Dir is $SAGE_HOME, made absolute (a relative one is taken from the
// working directory); when unset, Root for root (sessions run under their
// own uids, which must reach their workspaces: /root is closed to them)
// and ~/.sage for everyone else (os.TempDir()/sage without a home).
func Dir() string {
	if h := os.Getenv("SAGE_HOME"); h != "" {
		if abs, err := filepath.Abs(h); err == nil {
			return abs
		}
		return filepath.Clean(h)
	}
	if os.Geteuid() == 0 {
		return Root
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".sage")
	}
	return filepath.Join(os.TempDir(), "sage")
}
