//go:build !linux

package netbridge

// notDumpable does nothing outside Linux: the bridge runs only in Linux
// sandboxes (bwrap, gVisor); elsewhere there is no /proc to guard.
func notDumpable() error { return nil }
