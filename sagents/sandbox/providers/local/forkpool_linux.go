//go:build linux

package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/layers"
)

// maxForkPool bounds Options.ForkPool.
const maxForkPool = 8

// poolSize is how many spares the sandbox keeps once it forked (or from
// its start, with Options.ForkPool set): Options.ForkPool, 1 by default,
// none when negative.
func (f *forkSide) poolSize() int {
	switch {
	case f.size < 0:
		return 0
	case f.size == 0:
		return 1
	}
	return min(f.size, maxForkPool)
}

// refillDelay is how long after a fork took a pre-started sandbox the
// pool starts the next: the fork's first command runs meanwhile without
// a sandbox starting beside it.
const refillDelay = 200 * time.Millisecond

// refillLater is refill after refillDelay.
func (s *Sandbox) refillLater() { time.AfterFunc(refillDelay, s.refill) }

// refill makes the pool and fills it in the background (after a fork,
// or at the start with Options.ForkPool > 0).
func (s *Sandbox) refill() {
	f := &s.forks
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pool == nil {
		n := f.poolSize()
		if n == 0 || s.sess.closedNow() {
			return
		}
		f.pool = &forkPool{size: n, changed: make(chan struct{})}
	}
	p := f.pool
	for !p.closed && len(p.spares)+p.filling < p.size {
		p.filling++
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			sp, err := s.newSpare()
			if err != nil {
				slog.Debug("local sandbox: a pre-started sandbox for forks did not start; the next fork starts its own", "err", err)
			}
			f.mu.Lock()
			p.filling--
			if sp != nil && !p.closed {
				p.spares = append(p.spares, sp)
				sp = nil
			}
			close(p.changed)
			p.changed = make(chan struct{})
			f.mu.Unlock()
			if sp != nil {
				sp.Close(context.Background())
			}
		}()
	}
}

// A pooled sandbox's files lie side by side in SAGE_HOME/runtime:
// spare-ID (its placeholder folder), spare-ID.run (its runtime
// directory, the layers of the fork that takes it) and spare-ID.lock,
// which the process holds locked (flock) from before the others exist
// until after they are removed at Close. A process killed with -9 leaves
// all three; the next process that opens a sandbox in that SAGE_HOME
// removes those whose lock no one holds (sweep_linux.go).
const spareRunSuffix = ".run"

// newSpare opens an empty sandbox of s's configuration, as s's uid, over
// a placeholder folder of its own, and starts its session sandbox with
// its (empty) layers mounted: a fork takes it and mounts its own layers
// beneath (adopt).
func (s *Sandbox) newSpare() (*Sandbox, error) {
	// (What processes killed with -9 left there was swept at the
	// parent's open, NewWithOptions.)
	dir := filepath.Join(sagehome.Dir(), "runtime", driver.NewID("spare"))
	if err := makeParents(dir, s.ident != nil); err != nil {
		return nil, fmt.Errorf("local: fork pool: %w", err)
	}
	lock, err := hostkit.LockFile(dir + lockSuffix)
	if err != nil {
		return nil, fmt.Errorf("local: fork pool: %w", err)
	}
	if err := makeDirs(dir, s.ident != nil); err != nil {
		hostkit.Unlock(lock, dir+lockSuffix)
		return nil, fmt.Errorf("local: fork pool: %w", err)
	}
	in := &forkIn{ident: s.ident, placeholder: dir, lock: lock}
	if id := s.ident; id != nil {
		if err := os.Lchown(dir, id.UID, id.GID); err != nil {
			in.removeSpare()
			return nil, fmt.Errorf("local: fork pool: %w", err)
		}
	}
	cfg := s.forks.cfg
	cfg.Workspace, cfg.SandboxID, cfg.RuntimeDir = dir, "", dir+spareRunSuffix
	opts := s.forks.opts
	opts.Prestart = false
	sp, err := NewWithOptions(context.Background(), cfg, Options{Session: opts, ForkPool: -1, fork: in})
	if err != nil {
		in.removeSpare()
		return nil, err
	}
	// Started, layered and warm: a first command ran (it writes
	// nothing), so that the fork's first is as a warm one.
	ctx, cancel := context.WithTimeout(context.Background(), sessionStartTimeout)
	defer cancel()
	if res, err := sp.Exec(ctx, driver.ExecSpec{Command: "true"}); err != nil || !res.Success {
		sp.Close(context.Background())
		if err == nil {
			err = fmt.Errorf("local: fork pool: a pre-started sandbox's first command failed: %s", res.Stderr)
		}
		return nil, err
	}
	sp.ckpt.mu.Lock()
	up, err := sp.ckpt.newLayer() // the fork's upper, made ahead
	sp.ckpt.mu.Unlock()
	if err != nil {
		sp.Close(context.Background())
		return nil, err
	}
	sp.forkIn.upper = up
	return sp, nil
}

// takeSpare gives a fork held's layers in a pre-started sandbox, its
// workspace folder ws; nil when the pool has none ready (or the one
// taken failed: the caller opens a new one).
func (s *Sandbox) takeSpare(ctx context.Context, in *forkIn, ws string) *Sandbox {
	f := &s.forks
	f.mu.Lock()
	p := f.pool
	if p == nil || len(p.spares) == 0 {
		f.mu.Unlock()
		return nil
	}
	sp := p.spares[0]
	p.spares = p.spares[1:]
	f.mu.Unlock()
	if err := sp.adopt(ctx, in, ws); err != nil {
		slog.Debug("local sandbox: a pre-started sandbox did not take the fork's layers; the fork starts its own", "err", err)
		sp.Close(context.Background())
		return nil
	}
	return sp
}

// adopt makes the spare sp the fork in: its workspace folder becomes ws,
// and a new overlay of the fork's layers with a fresh upper is mounted
// beneath the spare's empty one (which goes), with the checkpoint's /tmp
// when it has one (ws's fork seed). On error sp is as it was.
func (sp *Sandbox) adopt(ctx context.Context, in *forkIn, ws string) error {
	release, err := sp.quiet(ctx, "fork")
	if err != nil {
		return err
	}
	defer release()
	c := sp.ckpt
	old, oldWS := sp.forkIn, sp.hostWS
	in.placeholder, in.lock = old.placeholder, old.lock
	sp.forkIn, sp.hostWS, sp.forks.size = in, ws, 0 // its own forks get a pool as any sandbox's
	undo := func(err error) error {
		sp.forkIn, sp.hostWS, sp.forks.size = old, oldWS, -1
		in.placeholder, in.lock = "", nil
		return err
	}
	c.takeSeed()
	seed := filepath.Join(c.dir, "tmp-seed")
	tmp := false
	if _, err := os.Lstat(seed); err == nil {
		if c.tmp.on() {
			err = c.importSeed(c.agent, seed)
			tmp = err == nil
		}
		removeLayer(seed)
		if err != nil {
			return undo(err)
		}
	}
	oldUp := c.m.Upper
	if tmp {
		// The checkpoint's /tmp too: both mounts in one request.
		oldTmpUp, oldTmpBase, oldTmpLayers := c.tmp.upper, c.tmp.base, c.tmp.layers
		c.tmp.base, c.tmp.layers = "b", nil
		if err := c.remount("fork", true, 0, true, 0, nil); err != nil {
			c.m.Upper = oldUp
			c.tmp.base, c.tmp.layers, c.tmp.upper = oldTmpBase, oldTmpLayers, oldTmpUp
			c.freeTmpBase("b")
			return undo(err)
		}
		c.freeTmpLayer(oldTmpUp)
		for _, l := range oldTmpLayers {
			c.freeTmpLayer(l)
		}
		c.freeLayer(old.upper)
	} else {
		// The workspace only, on the upper made ahead.
		d := c.layerDir(old.upper)
		c.dropAhead() // (a spare prepares none; the agent would drop them)
		ms, err := c.agent.Mount(layers.Layout{Lowers: c.stack(0), Upper: filepath.Join(d, "u"), Work: filepath.Join(d, "w"), Target: c.target})
		if err != nil {
			return undo(fmt.Errorf("local: fork: %w", err))
		}
		// The spare's mount, detached, goes with its last descriptor,
		// whose close syncs the file system of its upper: that happens
		// in the background, with the removal of its (empty) upper.
		prev, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
		c.setLive(ms[0])
		c.m.Upper = old.upper
		old.upper = 0
		go func() {
			if err == nil {
				unix.Close(prev)
			}
			removeLayer(c.layerDir(oldUp))
		}()
		// The manifest is saved by the fork's next operation (a fork's
		// runtime directory is its own: no other process reads it).
		return nil
	}
	old.upper = 0
	return c.save()
}

// closePool stops the pool's sandboxes (Close): those starting are
// waited for.
func (s *Sandbox) closePool(ctx context.Context) {
	f := &s.forks
	f.mu.Lock()
	p := f.pool
	if p == nil {
		f.mu.Unlock()
		return
	}
	p.closed = true
	f.mu.Unlock()
	p.wg.Wait()
	f.mu.Lock()
	spares := p.spares
	p.spares = nil
	f.mu.Unlock()
	for _, sp := range spares {
		sp.Close(ctx)
	}
}

// closedNow says whether Close began.
func (sl *sessionSlot) closedNow() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.closed
}

// removeSpare removes a pooled sandbox's files (Close, or its opening
// failed): the runtime directory and the placeholder, then the lock.
func (in *forkIn) removeSpare() {
	if in.lock == nil {
		return
	}
	removeLayer(in.placeholder + spareRunSuffix) // overlayfs's work directories are mode 0
	os.RemoveAll(in.placeholder)
	hostkit.Unlock(in.lock, in.placeholder+lockSuffix)
	in.lock = nil
}
