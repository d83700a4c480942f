//go:build linux

package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
)

// maxForks bounds the live forks standing on one sandbox's layers; a
// test lowers it.
var maxForks = 32

// sharedLayers are the layer directories forks stand on, by their
// current path (docs/checkpoints.md, "Fork").
var sharedLayers = struct {
	mu sync.Mutex
	by map[string]*sharedLayer
}{by: map[string]*sharedLayer{}}

// holdDirs holds the layer directories dirs for a fork.
func holdDirs(dirs []string) []*sharedLayer {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	out := make([]*sharedLayer, 0, len(dirs))
	for _, d := range dirs {
		l := sharedLayers.by[d]
		if l == nil {
			l = &sharedLayer{path: d}
			sharedLayers.by[d] = l
		}
		l.refs++
		out = append(out, l)
	}
	return out
}

// retain holds ls once more (a fork of a fork standing on them too).
func retain(ls []*sharedLayer) []*sharedLayer {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	for _, l := range ls {
		l.refs++
	}
	return ls
}

// releaseLayers lets ls go: a layer no fork holds any longer is removed
// when its owner let it go first.
func releaseLayers(ls []*sharedLayer) {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	for _, l := range ls {
		if l.refs--; l.refs > 0 {
			continue
		}
		if sharedLayers.by[l.path] == l {
			delete(sharedLayers.by, l.path)
		}
		if l.orphan && removeLayer(l.path) == nil && l.aside != "" {
			unaside(l.aside) // (one that could not be removed keeps its lock: a later sweep's)
		}
	}
}

// setAside is the owner's free of layer directory dir: when forks hold
// it, it is moved beside the runtime directory runtimeDir (whose removal
// must spare it) and removed at the last fork's release; false when no
// fork holds it (the caller removes it).
func setAside(dir, runtimeDir string) bool {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	l := sharedLayers.by[dir]
	if l == nil || l.refs == 0 {
		return false
	}
	if !l.orphan {
		moveAside(l, runtimeDir)
	}
	return true
}

// moveAside moves a held layer out of runtimeDir (under the lock), to
// .sage-forklayer-TOKEN-HEX beside it, and marks it its forks' alone.
// The forks' mounts keep working: overlayfs holds its lowers, not their
// paths; a fork's next mount takes the new path. The directory's lock
// .sage-forklayer-TOKEN.lock is held first (asideDirs): a process killed
// with -9 leaves its set-aside layers to a later process's sweep. A
// failed move leaves the layer in place, where its owner's removal of
// the runtime directory would take it: that is logged.
func moveAside(l *sharedLayer, runtimeDir string) {
	dir := filepath.Dir(runtimeDir)
	l.orphan = true
	a, err := lockAside(dir)
	if err != nil {
		slog.Warn("local sandbox: a layer forks stand on could not be set aside", "layer", l.path, "err", err)
		return
	}
	b := make([]byte, 6)
	rand.Read(b)
	dst := filepath.Join(dir, asidePrefix+asideToken()+"-"+hex.EncodeToString(b))
	a.layers++
	if err := os.Rename(l.path, dst); err != nil {
		unaside(dir)
		slog.Warn("local sandbox: a layer forks stand on could not be set aside", "layer", l.path, "err", err)
		return
	}
	delete(sharedLayers.by, l.path)
	l.path, l.aside = dst, dir
	sharedLayers.by[dst] = l
}

// asideToken names this process's set-aside layers and their locks.
var asideToken = sync.OnceValue(func() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
})

// asideDirs are the directories this process has layers set aside in
// (under sharedLayers.mu): each one's lock, held while it has any.
var asideDirs = map[string]*asideDir{}

type asideDir struct {
	lock   *os.File
	layers int
}

// lockAside is dir's entry in asideDirs, its lock made (after a sweep of
// what processes that died set aside there) when it has none.
func lockAside(dir string) (*asideDir, error) {
	if a := asideDirs[dir]; a != nil {
		return a, nil
	}
	sweep(dir, false) // once per process and directory (an open did it already)
	f, err := hostkit.LockFile(filepath.Join(dir, asidePrefix+asideToken()+lockSuffix))
	if err != nil {
		return nil, err
	}
	a := &asideDir{lock: f}
	asideDirs[dir] = a
	return a, nil
}

// unaside counts a layer set aside in dir out (removed, or its move
// failed): the last one's lock goes.
func unaside(dir string) {
	a := asideDirs[dir]
	if a.layers--; a.layers > 0 {
		return
	}
	delete(asideDirs, dir)
	hostkit.Unlock(a.lock, filepath.Join(dir, asidePrefix+asideToken()+lockSuffix))
}

// evacuate sets aside every held layer under root, before root is
// removed (Close of an anonymous sandbox).
func evacuate(root string) {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	for p, l := range sharedLayers.by {
		if l.refs > 0 && !l.orphan && within(root, p) {
			moveAside(l, root)
		}
	}
}

// forkFolders are the workspace folders of live forks (empty until
// their Close): a fork or Export into one is refused as into a folder
// that is not empty.
var forkFolders sync.Map

func forkFolderInUse(dir string) bool {
	if ws, err := filepath.EvalSymlinks(dir); err == nil {
		dir = ws
	}
	_, ok := forkFolders.Load(dir)
	return ok
}

// lowers are the fork's shared layers as overlay lowers, topmost first.
func (in *forkIn) lowers() []string {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	out := make([]string, 0, len(in.layers))
	for _, l := range in.layers {
		out = append(out, filepath.Join(l.path, "u"))
	}
	return out
}

// shared says whether the sandbox's base is its parent's layers.
func (s *Sandbox) shared() bool { return s.forkIn != nil && s.forkIn.layers != nil }

// sharedDepth is how many read-only layers the shared base stacks, above
// one (the merge bound counts them).
func (s *Sandbox) sharedDepth() int {
	if !s.shared() {
		return 0
	}
	return len(s.forkIn.layers) - 1
}

// dropShared lets the parent's layers go, once the fork no longer stands
// on them (a merge gave it a base of its own, or Close wrote its files
// into its folder).
func (s *Sandbox) dropShared() {
	in := s.forkIn
	if in == nil || in.layers == nil {
		return
	}
	releaseLayers(in.layers)
	in.layers = nil
	if in.done != nil {
		in.done()
		in.done = nil
	}
}

// ForkDriver opens a fork of checkpoint id (driver.Forker) on the
// checkpoint's frozen layers, shared read-only: no file is copied. Its
// session sandbox is a pre-started one from the pool when there is one
// (forkpool_linux.go), else a new one. A sandbox whose workspace is an
// idmapped mount, or not isolated by bwrap, copies the files (Export)
// instead.
func (s *Sandbox) ForkDriver(ctx context.Context, id driver.CheckpointID, cfg driver.Config) (driver.Driver, error) {
	return s.fork(ctx, id, cfg, true)
}

// fork is ForkDriver; pooled false never takes a pre-started sandbox.
func (s *Sandbox) fork(ctx context.Context, id driver.CheckpointID, cfg driver.Config, pooled bool) (*Sandbox, error) {
	if s.gckpt != nil { // under gVisor: the files copied, a new session
		if cfg.Workspace == "" {
			return nil, errors.New("local: fork: the new workspace folder is required; fix: name an empty or missing folder")
		}
		if err := s.Export(ctx, id, cfg.Workspace); err != nil {
			return nil, err
		}
		return NewWithOptions(ctx, cfg, Options{Session: s.sess.opts})
	}
	if err := s.checkpointsOn("fork"); err != nil {
		return nil, err
	}
	if cfg.Workspace == "" {
		return nil, errors.New("local: fork: the new workspace folder is required; fix: name an empty or missing folder")
	}
	if _, bwrap := s.iso.(*isolation.Bwrap); !bwrap || s.ident.Idmapped() {
		// The layers are files of the idmapped owner's (or another
		// isolation's, whose agent this does not drive): a copy.
		if err := s.Export(ctx, id, cfg.Workspace); err != nil {
			return nil, err
		}
		return NewWithOptions(ctx, cfg, Options{Session: s.sess.opts})
	}
	if !s.forks.reserve() {
		return nil, fmt.Errorf("local: fork of %s: %d forks stand on this sandbox's checkpoints, the most it keeps; fix: close one of them first", id, maxForks)
	}
	done := sync.OnceFunc(s.forks.unreserve)
	_, statErr := os.Lstat(cfg.Workspace)
	made := errors.Is(statErr, fs.ErrNotExist)
	fail := func(err error) (*Sandbox, error) {
		done()
		if made {
			os.Remove(cfg.Workspace)
		}
		return nil, err
	}
	if err := emptyTarget(cfg.Workspace); err != nil {
		return fail(err)
	}
	ws, err := prepareWorkspace(cfg.Workspace, false)
	if err != nil {
		return fail(err)
	}
	if id := s.ident; id != nil {
		// The fork runs as its parent's uid: its layers are that uid's.
		if err := os.Lchown(ws, id.UID, id.GID); err != nil {
			return fail(fmt.Errorf("local: fork workspace: %w", err))
		}
	}
	held, err := s.holdCheckpoint(ctx, id, ws)
	if err != nil {
		return fail(err)
	}
	in := &forkIn{ident: s.ident, layers: held, done: done}
	cfg.Workspace = ws
	var f *Sandbox
	if pooled {
		f = s.takeSpare(ctx, in, ws)
	}
	if f == nil {
		opts := s.sess.opts
		opts.Prestart = true // its files are its folder's only once it ran: start it now
		if f, err = NewWithOptions(ctx, cfg, Options{Session: opts, fork: in}); err != nil {
			releaseLayers(held)
			removeLayer(forkSeed(ws))
			return fail(err)
		}
	}
	forkFolders.Store(ws, true)
	if pooled {
		s.refillLater()
	}
	return f, nil
}

// holdCheckpoint holds the layers of checkpoint id for a fork into the
// folder ws, and leaves its /tmp as ws's fork seed. A base that is the
// host folder (which Close and Sync write into) is first copied into a
// layer of the sandbox's own, once per session: a fork never stands on a
// folder that changes.
func (s *Sandbox) holdCheckpoint(ctx context.Context, id driver.CheckpointID, ws string) ([]*sharedLayer, error) {
	c, i, release, err := s.quietAt(ctx, "fork", id)
	if err != nil {
		return nil, err
	}
	defer release()
	if c.m.Base == 0 && !s.shared() {
		if err := c.ownBase(); err != nil {
			return nil, err
		}
		if err := c.save(); err != nil {
			return nil, err
		}
	}
	e := c.m.Checkpoints[i]
	dirs := make([]string, 0, e.N+1)
	for j := e.N - 1; j >= 0; j-- {
		dirs = append(dirs, c.layerDir(c.m.Layers[j]))
	}
	var held []*sharedLayer
	if c.m.Base != 0 {
		held = holdDirs(append(dirs, c.layerDir(c.m.Base)))
	} else { // a fork's fork: its parent's layers too
		held = append(holdDirs(dirs), retain(s.forkIn.layers)...)
	}
	if err := c.exportTmp(e, ws); err != nil {
		releaseLayers(held)
		return nil, err
	}
	return held, nil
}

// reserve counts a fork in, false past maxForks.
func (f *forkSide) reserve() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live >= maxForks {
		return false
	}
	f.live++
	return true
}

func (f *forkSide) unreserve() {
	f.mu.Lock()
	f.live--
	f.mu.Unlock()
}

// closeFork runs first in Close: the pool's sandboxes go, and a fork
// whose session sandbox never started starts it, so that Close writes
// the fork's files into its folder.
func (s *Sandbox) closeFork(ctx context.Context) {
	s.closePool(ctx)
	if s.shared() && s.ckpt != nil {
		s.ckpt.mu.Lock()
		served := s.ckpt.served != nil
		s.ckpt.mu.Unlock()
		if !served {
			if err := s.ckpt.ensure(); err != nil {
				slog.Warn("local sandbox: the fork's session sandbox did not start: its files do not reach its folder", "workspace", s.hostWS, "err", err)
			}
		}
	}
}

// closeForkEnd runs last in Close: the parent's layers are let go (the
// fork's files are in its folder, or lost with an error), the files of
// a pooled sandbox (its placeholder folder, its runtime directory, its
// lock) are removed.
func (s *Sandbox) closeForkEnd() {
	if s.forkIn != nil {
		forkFolders.Delete(s.hostWS) // (an untaken spare's placeholder is none)
	}
	s.dropShared()
	if in := s.forkIn; in != nil && in.lock != nil {
		evacuate(s.runtimeDir) // layers forks stand on outlive it
		in.removeSpare()
	} else if in != nil && in.placeholder != "" {
		os.RemoveAll(in.placeholder)
	}
}
