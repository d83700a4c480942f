//go:build linux

package local

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// What a process killed with -9 leaves, and who removes it. The files a
// sandbox's process alone uses lie beside a lock file that the process
// holds locked (flock) from before they exist until after they are
// removed; a sweep that can take such a lock knows its process is gone
// (its sandboxes, bwrap and the layers agent died with it, and with them
// their mounts) and removes its files, then the lock:
//
//   - an anonymous sandbox's own runtime directory (SAGE_HOME/runtime/
//     local-ID: its layers, venv, background logs): local-ID.lock;
//   - a pooled sandbox's placeholder folder spare-ID and runtime
//     directory spare-ID.run (forkpool_linux.go): spare-ID.lock;
//   - the layers set aside for forks beside a runtime directory
//     (.sage-forklayer-TOKEN-HEX, TOKEN the process's, fork_linux.go):
//     .sage-forklayer-TOKEN.lock, held while the process has any set
//     aside there.
//
// The locks are hostkit's (LockFile, SweepLock): made under a temporary
// name and renamed once locked, so a sweep never sees one unlocked. A named sandbox's runtime directory has
// no lock and is never swept: it outlives its process with its
// checkpoints.
const (
	lockSuffix       = ".lock"
	ownRuntimePrefix = "local-"
	sparePrefix      = "spare-"
	asidePrefix      = ".sage-forklayer-"
)

// swept are the directories this process swept (sweep's keys).
var swept sync.Map

type sweepKey struct {
	dir       string
	sandboxes bool
}

// sweep removes, once per process and directory, what processes that
// died left in dir: the layers they set aside for forks, and with
// sandboxes (dir is SAGE_HOME/runtime) their anonymous and pooled
// sandboxes' files. A lock this process holds is held as well: flock
// conflicts between two opens of one file. Mounts a dead process left
// attached there (an idmapped workspace's) are detached first: a
// removal never goes through one.
func sweep(dir string, sandboxes bool) {
	if _, done := swept.LoadOrStore(sweepKey{dir, sandboxes}, true); done {
		return
	}
	if sandboxes {
		swept.Store(sweepKey{dir, false}, true) // this sweep covers it
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		stem, ok := strings.CutSuffix(name, lockSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		var files []string
		switch {
		case sandboxes && strings.HasPrefix(stem, sparePrefix):
			files = []string{stem + spareRunSuffix, stem, stem + ".img"} // (.img: its quota image, with one)
		case sandboxes && strings.HasPrefix(stem, ownRuntimePrefix):
			files = []string{stem}
		case strings.HasPrefix(stem, asidePrefix) && len(stem) > len(asidePrefix) && !strings.Contains(stem[len(asidePrefix):], "-"):
			for _, l := range ents {
				if strings.HasPrefix(l.Name(), stem+"-") {
					files = append(files, l.Name())
				}
			}
		default:
			continue
		}
		sweepLock(dir, name, files)
	}
}

// sweepLock removes files (names in dir), then the lock file name, when
// the lock's process is gone (hostkit.SweepLock). Mounts a dead process
// left on them are detached first; while one stays, nothing is removed.
func sweepLock(dir, name string, files []string) {
	path := filepath.Join(dir, name)
	hostkit.SweepLock(path, func() error {
		real, err := filepath.EvalSymlinks(dir) // as mountinfo has it
		if err != nil {
			return err
		}
		paths := make([]string, len(files))
		for i, p := range files {
			paths[i] = filepath.Join(real, p)
		}
		if !detachMounts(paths) {
			slog.Warn("local sandbox: files left by a process that died are still mounted on: left as they are", "lock", path)
			return errStillMounted
		}
		slog.Debug("local sandbox: removing files left by a process that died", "lock", path, "files", files)
		for _, p := range paths {
			if err := removeLayer(p); err != nil { // overlayfs's work directories are mode 0
				return err
			}
		}
		return nil
	})
}

var errStillMounted = errors.New("still mounted on")

// detachMounts detaches (lazily) the mounts of this mount namespace at
// or under paths, which outlived the process that made them: an
// idmapped workspace's in the runtime directory (a removal through it
// would remove the workspace's files), gVisor's network namespace file.
// A detach removes no file. False when one is still there.
func detachMounts(paths []string) bool {
	for range 64 { // mounts stacked on one another go one a round
		ms, err := mountsUnder(paths)
		if err != nil {
			return false // unknown: nothing is removed
		}
		if len(ms) == 0 {
			return true
		}
		for _, m := range ms {
			unix.Unmount(m, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
	}
	return false
}

// mountsUnder are the mount points at or under paths in
// /proc/self/mountinfo, deepest first.
func mountsUnder(paths []string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := uids.UnescapeMount(fields[4])
		for _, p := range paths {
			if within(p, mp) {
				out = append(out, mp)
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, nil
}

// lockOwnRuntime locks an anonymous sandbox's own runtime directory, to
// be made next: its lock is the directory's name and ".lock".
func (s *Sandbox) lockOwnRuntime() (err error) {
	s.runtimeLock, err = hostkit.LockFile(s.runtimeDir + lockSuffix)
	return err
}

// removeOwnRuntime removes an anonymous sandbox's own runtime directory,
// then its lock (Close, or its opening failed). A directory that could
// not be removed keeps its lock, held until this process ends: the sweep
// of a later one tries again.
func (s *Sandbox) removeOwnRuntime() error {
	if !s.ownRuntime || s.runtimeLock == nil {
		return nil
	}
	if err := removeLayer(s.runtimeDir); err != nil {
		return err
	}
	hostkit.Unlock(s.runtimeLock, s.runtimeDir+lockSuffix)
	s.runtimeLock = nil
	return nil
}
