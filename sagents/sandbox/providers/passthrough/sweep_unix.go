//go:build unix

package passthrough

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// An anonymous sandbox's runtime directory (SAGE_HOME/runtime/pt-ID: its
// code files and background tasks' logs) is removed at Close. A process
// killed with -9 never closes it: the directory has a lock beside it,
// pt-ID.lock, held from before the directory exists until after it is
// removed, and the first anonymous sandbox a later process opens there
// removes those whose lock no one holds (hostkit.SweepLock). A named
// sandbox's runtime directory is never swept.
const (
	ownRuntimePrefix = "pt-"
	lockSuffix       = ".lock"
)

// swept are the runtime roots this process swept.
var swept sync.Map

// lockOwnRuntime sweeps the runtime root once per process, then locks
// the sandbox's own runtime directory, to be made when first used. Where
// SAGE_HOME cannot be written (a container's read-only root: sandboxd in
// a Pod), the sandbox opens as before, without the lock: its runtime
// directory is made only when a task or code file needs it (which then
// fails with its own error), and a kill -9 can leave nothing there.
func (s *Sandbox) lockOwnRuntime() {
	root := filepath.Dir(s.runtimeDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		slog.Debug("passthrough sandbox: no lock for the runtime directory", "dir", s.runtimeDir, "err", err)
		return
	}
	if _, done := swept.LoadOrStore(root, true); !done {
		sweep(root)
	}
	f, err := hostkit.LockFile(s.runtimeDir + lockSuffix)
	if err != nil {
		slog.Debug("passthrough sandbox: no lock for the runtime directory", "dir", s.runtimeDir, "err", err)
		return
	}
	s.runtimeLock = f
}

// removeOwnRuntime removes an anonymous sandbox's runtime directory, then
// its lock (Close). One that could not be removed keeps its lock until
// this process ends, for a later sweep.
func (s *Sandbox) removeOwnRuntime() error {
	if !s.ownRuntime {
		return nil
	}
	if _, err := os.Lstat(s.runtimeDir); err == nil { // (never made: nothing to remove)
		if err := os.RemoveAll(s.runtimeDir); err != nil {
			return err
		}
	}
	hostkit.Unlock(s.runtimeLock, s.runtimeDir+lockSuffix)
	s.runtimeLock = nil
	return nil
}

// sweep removes the runtime directories of anonymous sandboxes under root
// whose process is gone.
func sweep(root string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), lockSuffix)
		if !ok || !strings.HasPrefix(stem, ownRuntimePrefix) || !e.Type().IsRegular() {
			continue
		}
		dir := filepath.Join(root, stem)
		hostkit.SweepLock(filepath.Join(root, e.Name()), func() error { return os.RemoveAll(dir) })
	}
}
