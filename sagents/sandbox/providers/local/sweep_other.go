//go:build !linux

package local

import "os"

// Only Linux locks and sweeps what a process killed with -9 leaves
// (sweep_linux.go).
func sweep(string, bool)                 {}
func (s *Sandbox) lockOwnRuntime() error { return nil }

func (s *Sandbox) removeOwnRuntime() error {
	if !s.ownRuntime {
		return nil
	}
	return os.RemoveAll(s.runtimeDir)
}
