//go:build linux

package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/layers"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// maxLayers is how many read-only layers a workspace stacks before the
// oldest half is merged into a new base (overlayfs takes 500); a test
// lowers it.
var maxLayers = 400

// checkpoints keeps a session sandbox's workspace as overlay layers in
// the runtime directory (docs/checkpoints.md). The live state is the
// overlay mounted at the workspace inside the session sandbox: its base
// is the host workspace folder (or, once layers were merged, a merged
// copy), then the frozen layers, then the writable upper. The host's
// file operations reach that mount through a descriptor of it kept at a
// fixed number (dup3), /proc/self/fd/N being the workspace's host root.
type checkpoints struct {
	mu     sync.Mutex
	s      *Sandbox
	dir    string // runtimeDir/layers: manifest.json, one directory per layer
	target string // the workspace inside
	m      manifest
	agent  *layers.Agent
	served *liveSession // the session the agent and cur belong to
	cur    *os.File     // the live mount
	fd     int          // the descriptor number HostFS reaches it by
	tmp    tmpLayers    // the session's /tmp (checkpoint_tmp_linux.go)
	slots  manifestSlots
	spare  spareLayer
	ahead  *aheadMounts   // the overlays the agent builds ahead (prepareAhead); nil: none
	base   *baseCopy      // the host folder copied ahead for the first fork (startBaseCopy); nil: none
	bg     sync.WaitGroup // layer directories being made (prepareSpare, prepareAhead) or removed (freeLayer)
}

// manifest is what survives the process (manifest.json and
// manifest.b.json, written in turns; checkpoint_manifest_linux.go): a new
// daemon finds the layers and checkpoints again.
type manifest struct {
	Next        int         `json:"next"`
	Base        int         `json:"base"`   // 0: the host folder; else a merged layer
	Layers      []int       `json:"layers"` // frozen, bottom first
	Upper       int         `json:"upper"`  // the last live upper; 0: none
	Checkpoints []ckptEntry `json:"checkpoints"`
	// Folder, set when a Close kept the checkpoints of agent turns, is
	// the fingerprint of the host folder it wrote back: the next start
	// keeps them only while the folder is still that (keepTurns).
	Folder string `json:"folder,omitempty"`
}

type ckptEntry struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	N    int       `json:"n"` // its state is Base + Layers[:N]
	Size int64     `json:"size"`
	// Turns: the agent turns whose end state it is (CheckpointTurn).
	Turns []int `json:"turns,omitempty"`
	// Duration: what taking it cost (driver.Checkpoint.Duration).
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// setupCheckpoints turns checkpoints on for s (NewWithOptions, once
// HostFS exists): it refuses what cannot stack layers, reserves the
// workspace descriptor and points HostFS at it.
func (s *Sandbox) setupCheckpoints(cfg driver.Config) error {
	if !cfg.Local.Checkpoints {
		return nil
	}
	if g, ok := s.iso.(*isolation.Gvisor); ok {
		return s.setupGvisorCheckpoints(cfg, g)
	}
	if _, ok := s.iso.(*isolation.Bwrap); !ok || !s.sess.opts.Enabled {
		return &driver.ConfigError{Field: "sandbox.local.checkpoints", Value: "on",
			Reason: "checkpoints need the bwrap session sandbox (isolation auto or bwrap, fresh_per_command unset or false); fresh sandboxes have none yet"}
	}
	if cfg.Local.DiskQuotaMB > 0 || cfg.Local.DiskQuotaInodes > 0 {
		return &driver.ConfigError{Field: "sandbox.local.checkpoints", Value: "on",
			Reason: "the layers live in the runtime directory, outside the workspace's quota file system; fix: drop disk_quota_mb (and disk_quota_inodes) or checkpoints"}
	}
	c := &checkpoints{s: s, dir: filepath.Join(s.runtimeDir, "layers"), target: s.HostFS.Mapper.Workspace()}
	c.tmp.dir = filepath.Join(c.dir, "tmp")
	if err := makePrivateDir(c.dir, s.ident); err != nil {
		return fmt.Errorf("local: checkpoint layers: %w", err)
	}
	// The mount point of /tmp's store, in the agent's namespace only.
	if err := os.Mkdir(c.tmp.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("local: checkpoint layers: %w", err)
	}
	seq, err := loadManifest(c.dir, &c.m)
	if err != nil {
		return err
	}
	if err := c.slots.open(c.dir, seq); err != nil {
		return err
	}
	if c.m.Next == 0 {
		c.m.Next = 1
	}
	if c.m.Folder != "" {
		if err := c.resume(); err != nil {
			c.slots.close()
			return err
		}
	}
	c.sweep()
	c.takeSeed()
	ws, err := os.OpenFile(s.bindWS, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.slots.close()
		return fmt.Errorf("local: checkpoints: %w", err)
	}
	c.fd = int(ws.Fd())
	c.cur = ws
	s.HostFS.Mapper = s.HostFS.Mapper.WithWorkspaceRoot("/proc/self/fd/" + strconv.Itoa(c.fd))
	if id := s.ident; id != nil {
		// Files the host writes live in the upper, whose file system takes
		// only the sandbox's uids: root writes as its uid (setfsuid on one
		// locked thread), with its permissions.
		s.HostFS.Owner = nil
		s.HostFS.As = func(f func() error) error { return asFSUID(id.UID, id.GID, f) }
	}
	s.HostFS.Check = c.ensure
	s.ckpt = c
	return nil
}

// ensure starts the session sandbox (and so mounts the layers) before a
// host file operation: the folder alone is not the live state.
func (c *checkpoints) ensure() error {
	ctx, cancel := context.WithTimeout(context.Background(), sessionStartTimeout)
	defer cancel()
	l, restarted, err := c.s.session(ctx, nil)
	if err != nil {
		return err
	}
	if restarted { // the next command reports it: its processes are gone
		c.s.sess.mu.Lock()
		c.s.sess.restartUnreported = true
		c.s.sess.mu.Unlock()
	}
	l.idle()
	return nil
}

func (c *checkpoints) layerDir(n int) string { return filepath.Join(c.dir, strconv.Itoa(n)) }

// stack is the lowers of Base + Layers[:n], topmost first.
func (c *checkpoints) stack(n int) []string {
	out := make([]string, 0, n+1)
	for i := n - 1; i >= 0; i-- {
		out = append(out, filepath.Join(c.layerDir(c.m.Layers[i]), "u"))
	}
	if c.m.Base == 0 {
		if c.s.shared() { // a fork: its parent's layers (fork_linux.go)
			return append(out, c.s.forkIn.lowers()...)
		}
		return append(out, c.s.bindWS)
	}
	return append(out, filepath.Join(c.layerDir(c.m.Base), "u"))
}

// newLayer is an empty layer (u, w), the sandbox uid's: the spare one
// made ahead (prepareSpare), or a new one.
func (c *checkpoints) newLayer() (int, error) {
	if n, ok := c.takeSpare(); ok {
		return n, nil
	}
	n := c.m.Next
	c.m.Next++
	if err := c.makeLayer(n); err != nil {
		return 0, err
	}
	return n, nil
}

// makeLayer makes layer n's directories.
func (c *checkpoints) makeLayer(n int) error {
	d := c.layerDir(n)
	for _, p := range []string{d, filepath.Join(d, "u"), filepath.Join(d, "w")} {
		if err := os.Mkdir(p, 0o700); err != nil {
			os.RemoveAll(d)
			return fmt.Errorf("local: checkpoint layer: %w", err)
		}
		if id := c.s.ident; id != nil {
			if err := os.Lchown(p, id.UID, id.GID); err != nil {
				os.RemoveAll(d)
				return fmt.Errorf("local: checkpoint layer: %w", err)
			}
		}
	}
	return nil
}

// spareLayer is the next writable layer of the workspace, made in the
// background after an operation (three directories on a journalling file
// system cost 0.1-3 ms, which the next operation then does not wait for).
type spareLayer struct {
	n     int           // 0: none
	ready chan struct{} // closed once made
	err   error         // set before ready is closed
}

// prepareSpare starts making the spare layer, unless there is one.
func (c *checkpoints) prepareSpare() {
	if c.spare.n != 0 {
		return
	}
	n := c.m.Next
	c.m.Next++
	sp := &c.spare
	sp.n, sp.ready, sp.err = n, make(chan struct{}), nil
	ready := sp.ready
	c.bg.Go(func() {
		err := c.makeLayer(n)
		sp.err = err
		close(ready)
	})
}

// takeSpare is the spare layer, once made; ok is false without one.
func (c *checkpoints) takeSpare() (n int, ok bool) {
	sp := &c.spare
	if sp.n == 0 {
		return 0, false
	}
	<-sp.ready
	n, err := sp.n, sp.err
	sp.n = 0
	return n, err == nil
}

// putSpare gives back layer n, unused (an operation that failed before
// its mount was built), as the spare one.
func (c *checkpoints) putSpare(n int) {
	if c.spare.n != 0 {
		removeLayer(c.layerDir(n))
		return
	}
	ready := make(chan struct{})
	close(ready)
	c.spare = spareLayer{n: n, ready: ready}
}

// dropSpare removes the spare layer (Close).
func (c *checkpoints) dropSpare() {
	if n, ok := c.takeSpare(); ok {
		removeLayer(c.layerDir(n))
	}
}

// sweep removes the layer directories the manifest does not name: a
// spare layer or a removal a kill cut short.
func (c *checkpoints) sweep() {
	used := map[int]bool{c.m.Base: true, c.m.Upper: true}
	for _, n := range c.m.Layers {
		used[n] = true
	}
	ents, _ := os.ReadDir(c.dir)
	for _, e := range ents {
		p := filepath.Join(c.dir, e.Name())
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && n > 0 && !used[n] && !heldByForks(p) {
			removeLayer(p)
		}
	}
}

// heldByForks says whether forks of this process stand on the layer at
// dir (fork_linux.go).
func heldByForks(dir string) bool {
	sharedLayers.mu.Lock()
	defer sharedLayers.mu.Unlock()
	l := sharedLayers.by[dir]
	return l != nil && l.refs > 0
}

// freeLayer removes layer n's directory in the background (on a
// journalling file system removing a tree costs milliseconds, which no
// operation waits for); layer numbers are never used again, and Close
// waits for the removals. One that forks stand on is set aside for them.
func (c *checkpoints) freeLayer(n int) {
	dir := c.layerDir(n)
	if setAside(dir, c.s.runtimeDir) { // a layer forks stand on waits for them
		return
	}
	c.bg.Go(func() { removeLayer(dir) })
}

// removeLayer removes a layer's directory; overlayfs leaves its work
// directory's "work" with mode 0, which an unprivileged owner must open
// up before it can empty it.
func removeLayer(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
			if err != nil { // unreadable until now: walk it again
				return removeLayer(p)
			}
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// aheadMounts are the workspace overlays the agent builds after an
// operation for the next one (layers.Agent.Prepare): one for a
// checkpoint (the live upper frozen on top of the layers) and one for a
// rollback to the latest checkpoint (the layers alone), each with an
// upper of its own. The operation whose mount is one of them takes its
// upper, and the agent attaches the overlay built ahead; the others'
// uppers are freed. Building an overlay with an upper (overlayfs sets up
// its work directory: 0.5-4 ms on ext4, more while the file system
// commits its journal) is then no part of a checkpoint or a rollback.
type aheadMounts struct {
	done  chan struct{} // closed once the agent answered (or the directories failed)
	items []aheadItem
	err   error // set before done is closed: nothing was built
}

type aheadItem struct {
	lowers []string
	upper  int
}

// prepareAhead has the agent build the next checkpoint's and the next
// rollback's overlays in the background, unless it does already. The
// next operation waits for it (takeAhead): the agent serves one request
// at a time.
func (c *checkpoints) prepareAhead() {
	if c.agent == nil || c.ahead != nil || c.m.Upper == 0 || c.s.spareUntaken() {
		return
	}
	live := c.stack(len(c.m.Layers))
	items := []aheadItem{{lowers: append([]string{filepath.Join(c.layerDir(c.m.Upper), "u")}, live...)}}
	if last := len(c.m.Checkpoints) - 1; last >= 0 && c.m.Checkpoints[last].N == len(c.m.Layers) {
		items = append(items, aheadItem{lowers: live})
	}
	ls := make([]layers.Layout, len(items))
	for i := range items {
		items[i].upper = c.m.Next
		c.m.Next++
		d := c.layerDir(items[i].upper)
		ls[i] = layers.Layout{Lowers: items[i].lowers, Upper: filepath.Join(d, "u"), Work: filepath.Join(d, "w"), Target: c.target}
	}
	ah := &aheadMounts{done: make(chan struct{}), items: items}
	c.ahead = ah
	a := c.agent
	c.bg.Go(func() {
		defer close(ah.done)
		for _, it := range items {
			if ah.err = c.makeLayer(it.upper); ah.err != nil {
				return
			}
		}
		ah.err = a.Prepare(ls...)
	})
}

// takeAhead is the upper of the overlay built ahead over lowers, once
// the agent built it (ok false: none); the other layers made ahead are
// freed, as the agent drops their overlays at the next mount.
func (c *checkpoints) takeAhead(lowers []string) (upper int, ok bool) {
	ah := c.ahead
	if ah == nil {
		return 0, false
	}
	c.ahead = nil
	<-ah.done
	for _, it := range ah.items {
		if !ok && ah.err == nil && slices.Equal(it.lowers, lowers) {
			upper, ok = it.upper, true
			continue
		}
		c.freeLayer(it.upper)
	}
	return upper, ok
}

// dropAhead frees what prepareAhead made (the agent goes, or the mount
// request is another's).
func (c *checkpoints) dropAhead() { c.takeAhead(nil) }

// spareUntaken says whether s is a pre-started sandbox of a fork pool
// no fork took yet: its layers are replaced whole at the take.
func (s *Sandbox) spareUntaken() bool {
	return s.forkIn != nil && s.forkIn.placeholder != "" && s.forkIn.layers == nil
}

// save records the manifest (checkpoint_manifest_linux.go): in the page
// cache when it returns, which a kill -9 of the daemon does not lose.
func (c *checkpoints) save() error { return c.slots.write(&c.m) }

// attach mounts the layers in a session sandbox that just started (under
// the session slot's lock): a previous session's upper, if any, becomes
// a frozen layer, and a new upper takes the writes.
func (c *checkpoints) attach(l *liveSession) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropAhead()
	if c.agent != nil {
		c.agent.Close()
		c.agent = nil
	}
	pid, err := sandboxInit(l.cmd.Process.Pid)
	if err != nil {
		return err
	}
	exe, err := c.agentExecutable()
	if err != nil {
		return err
	}
	a, err := layers.Start(layers.StartOptions{Bwrap: c.s.iso.(*isolation.Bwrap).Path(), Exe: exe, Pid: pid,
		Cred: c.s.ident.Credential()})
	if err != nil {
		return fmt.Errorf("local: checkpoints: %w", err)
	}
	if c.m.Upper != 0 {
		if empty(filepath.Join(c.layerDir(c.m.Upper), "u")) {
			c.freeLayer(c.m.Upper)
		} else {
			c.m.Layers = append(c.m.Layers, c.m.Upper)
		}
		c.m.Upper = 0
	}
	c.agent = a
	if err := c.startTmp(a); err != nil {
		a.Close()
		c.agent = nil
		return err
	}
	if err := c.remount("checkpoints", true, len(c.m.Layers), c.tmp.on(), 0, nil); err != nil {
		c.tmp.close()
		a.Close()
		c.agent = nil
		return err
	}
	if c.spare.n != 0 {
		<-c.spare.ready // a start makes it at once
	}
	c.served = l
	return c.save()
}

// agentExecutable is this program under the agent's name (bwrap runs it
// with its path as argv[0]): a link in the runtime directory, or a copy
// where links are refused (protected_hardlinks), made once.
func (c *checkpoints) agentExecutable() (string, error) {
	exe, err := bridgeExecutable()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(c.s.runtimeDir, layers.Name)
	if a, err := os.Stat(exe); err == nil {
		if b, err := os.Stat(dst); err == nil && (os.SameFile(a, b) || b.Size() == a.Size() && !b.ModTime().Before(a.ModTime())) {
			return dst, nil
		}
	}
	os.Remove(dst)
	if err := os.Link(exe, dst); err != nil {
		if err := copyExecutable(exe, dst); err != nil {
			return "", fmt.Errorf("local: %s: %w", layers.Name, err)
		}
	}
	if err := uids.Reachable(dst, c.s.ident, uids.NeedRead|uids.NeedExec); err != nil {
		os.Remove(dst)
		if err := copyExecutable(exe, dst); err != nil { // a link keeps the mode of the original
			return "", fmt.Errorf("local: %s: %w", layers.Name, err)
		}
	}
	return dst, nil
}

// remount mounts a new upper over Base + Layers[:n] at the workspace
// (ws) and over /tmp's base and layers[:tn] at /tmp (tmp), in one call,
// and makes them the live mounts; on error nothing changed, but for an
// ENOTRECOVERABLE one: the workspace has its new mount, /tmp has not, and
// the session sandbox is stopped (its next command starts one, with an
// empty /tmp, as any restart).
//
// freeze are the live mounts to make read-only first, in the same request
// (a checkpoint, a rollback): it fails with ErrCheckpointBusy while a file
// is open for writing in one of them, and any error before the new mounts
// are attached leaves them writable again.
func (c *checkpoints) remount(op string, ws bool, n int, tmp bool, tn int, freeze []string) error {
	var ls []layers.Layout
	wsUp, tmpUp := 0, 0
	fromAhead := false // wsUp is the upper of an overlay the agent built ahead
	if ws {
		lowers := c.stack(n)
		up, ok := c.takeAhead(lowers)
		if fromAhead = ok; !ok {
			var err error
			if up, err = c.newLayer(); err != nil {
				return err
			}
		}
		d := c.layerDir(up)
		ls = append(ls, layers.Layout{Lowers: lowers, Upper: filepath.Join(d, "u"), Work: filepath.Join(d, "w"), Target: c.target})
		wsUp = up
	} else {
		c.dropAhead() // the agent drops them at this mount
	}
	if tmp {
		up, err := c.newTmpLayer()
		if err != nil {
			if ws {
				removeLayer(c.layerDir(wsUp)) // at once: nothing changed
			}
			return err
		}
		d := filepath.Join(c.tmp.dir, strconv.Itoa(up))
		ls = append(ls, layers.Layout{Lowers: c.tmp.stack(tn), Upper: filepath.Join(d, "u"), Work: filepath.Join(d, "w"), Target: tmpTarget})
		tmpUp = up
	}
	if len(ls) == 0 {
		return nil
	}
	ms, err := c.agent.Swap(freeze, ls...)
	if errors.Is(err, syscall.ENOTRECOVERABLE) && ws {
		c.m.Upper = wsUp
		c.freeTmpLayer(tmpUp)
		if c.served != nil {
			c.served.stop()
		}
		c.tmp.close()
		return fmt.Errorf("local: checkpoints: %w; the session sandbox was stopped: its next command starts a new one, with an empty /tmp", err)
	}
	if err != nil {
		refused := errors.Is(err, syscall.EBUSY) && len(freeze) > 0 // the freeze: no mount was built
		if ws && refused && !fromAhead {
			c.putSpare(wsUp)
		} else if ws && fromAhead {
			c.freeLayer(wsUp) // the agent closes its overlay meanwhile: not one to reuse at once
		} else if ws {
			removeLayer(c.layerDir(wsUp)) // at once: nothing changed
		}
		c.freeTmpLayer(tmpUp)
		if refused {
			return busy(op)
		}
		return fmt.Errorf("local: checkpoints: %w", err)
	}
	if ws {
		c.setLive(ms[0])
		c.m.Upper = wsUp
		ms = ms[1:]
		c.prepareSpare()
	}
	closeAll(ms)
	if tmp {
		c.tmp.upper = tmpUp
	}
	return nil
}

// setLive makes m the mount HostFS reaches (at the same number). The
// mount it replaces is let go in the background: the host's descriptor
// is its last reference, and dropping it tears the old overlay down,
// which syncs its upper's file system (0.1-0.7 ms on ext4).
func (c *checkpoints) setLive(m *os.File) {
	old, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	unix.Dup3(int(m.Fd()), c.fd, unix.O_CLOEXEC)
	m.Close()
	if err == nil {
		c.bg.Go(func() { unix.Close(old) })
	}
}

// sandboxInit is the sandbox's pid 1, bwrap's child, once it runs the
// supervisor: before that exec bwrap may still be making the sandbox's
// mounts and its inner user namespace.
func sandboxInit(bwrapPid int) (int, error) {
	deadline := time.Now().Add(sessionStartTimeout)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", bwrapPid, bwrapPid))
		if err != nil {
			return 0, fmt.Errorf("local: checkpoints: the session sandbox's init: %w", err)
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil {
			argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.HasPrefix(string(argv), sandboxSupervisor+"\x00") {
				return pid, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("local: checkpoints: the session sandbox's supervisor did not start within %v", sessionStartTimeout)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func empty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// quiet takes the session sandbox between commands for an operation on
// its layers: started if needed, no command running, and none starting
// until release (the slot's lock is held).
func (s *Sandbox) quiet(ctx context.Context, op string) (release func(), err error) {
	l, _, err := s.session(ctx, nil)
	if err != nil {
		return nil, err
	}
	s.sess.mu.Lock()
	l.mu.Lock()
	busy := l.busy - l.tasks // background tasks may run: a writer among them makes the freeze fail
	l.mu.Unlock()
	if busy > 1 || s.sess.live != l {
		s.sess.mu.Unlock()
		l.idle()
		return nil, fmt.Errorf("local: %s: %w; fix: wait for it to end or stop it", op, driver.ErrCommandRunning)
	}
	s.ckpt.mu.Lock()
	if s.ckpt.served != l {
		s.ckpt.mu.Unlock()
		s.sess.mu.Unlock()
		l.idle()
		return nil, fmt.Errorf("local: %s: the session sandbox has no layered workspace", op)
	}
	return func() { s.ckpt.mu.Unlock(); s.sess.mu.Unlock(); l.idle() }, nil
}

func (s *Sandbox) checkpointsOn(op string) error {
	if s.ckpt == nil {
		return fmt.Errorf("local: %s: checkpoints are off for this sandbox; fix: sandbox.local.checkpoints: on (sage --checkpoints): %w", op, driver.ErrUnsupported)
	}
	return nil
}

// freeze makes the live mounts at targets read-only (all or none), or
// says who stops it.
func (c *checkpoints) freeze(op string, targets ...string) error {
	if len(targets) == 0 {
		return nil
	}
	err := c.agent.Freeze(targets...)
	if errors.Is(err, syscall.EBUSY) {
		return busy(op)
	}
	return err
}

// busy is op's error when a freeze met a writer.
func busy(op string) error {
	return fmt.Errorf("local: %s: %w (a background task or a host file operation is writing, in the workspace or /tmp); nothing changed; fix: wait for it or stop it (sage exec --session S --kill ID), then try again",
		op, driver.ErrCheckpointBusy)
}

// thaw undoes freeze.
func (c *checkpoints) thaw(targets ...string) {
	if len(targets) > 0 {
		c.agent.Thaw(targets...)
	}
}

// targets are the mounts whose flags say which: the workspace, /tmp.
func (c *checkpoints) targets(ws, tmp bool) []string {
	var out []string
	if ws {
		out = append(out, c.target)
	}
	if tmp {
		out = append(out, tmpTarget)
	}
	return out
}

// Checkpoint saves the workspace (sandbox.Checkpointer): the upper is
// frozen into a layer and a new one mounted on top. A workspace with no
// change since the last checkpoint costs nothing (no new layer).
func (s *Sandbox) Checkpoint(ctx context.Context) (driver.Checkpoint, error) {
	return s.checkpoint(ctx, -1)
}

// CheckpointTurn is Checkpoint labelled with the agent turn it ends
// (driver.TurnCheckpointer); an unchanged workspace adds the turn to the
// last checkpoint, when that one is the live state, instead of a new one.
func (s *Sandbox) CheckpointTurn(ctx context.Context, turn int) (driver.Checkpoint, error) {
	return s.checkpoint(ctx, turn)
}

// checkpoint is Checkpoint with turn (-1: none).
func (s *Sandbox) checkpoint(ctx context.Context, turn int) (driver.Checkpoint, error) {
	if s.gckpt != nil {
		return s.gckpt.checkpoint(ctx, turn)
	}
	start := time.Now()
	if err := s.checkpointsOn("checkpoint"); err != nil {
		return driver.Checkpoint{}, err
	}
	release, err := s.quiet(ctx, "checkpoint")
	if err != nil {
		return driver.Checkpoint{}, err
	}
	defer release()
	c := s.ckpt
	upper := filepath.Join(c.layerDir(c.m.Upper), "u")
	var size int64
	wsSame, tmpSame := empty(upper), c.tmp.upperEmpty()
	if last := len(c.m.Checkpoints) - 1; turn >= 0 && wsSame && tmpSame && last >= 0 &&
		c.m.Checkpoints[last].N == len(c.m.Layers) && c.tmpIs(c.m.Checkpoints[last]) {
		// The live state is the last checkpoint's: the turn changed
		// nothing, and costs the manifest only.
		e := &c.m.Checkpoints[last]
		if !slices.Contains(e.Turns, turn) {
			e.Turns = append(e.Turns, turn)
		}
		if c.tmp.on() {
			c.tmp.n[e.ID] = len(c.tmp.layers) // the same /tmp, now in this session sandbox
		}
		if err := c.save(); err != nil {
			return driver.Checkpoint{}, err
		}
		info := c.info(*e)
		info.Duration = time.Since(start)
		return info, nil
	}
	if !wsSame || !tmpSame {
		// One request freezes the uppers that changed and mounts new
		// ones on top (both or neither).
		frozen := c.targets(!wsSame, !tmpSame)
		oldWS, oldTmp := c.m.Upper, c.tmp.upper
		if !wsSame {
			c.m.Layers = append(c.m.Layers, oldWS)
		}
		if !tmpSame {
			c.tmp.layers = append(c.tmp.layers, oldTmp)
		}
		if err := c.remount("checkpoint", !wsSame, len(c.m.Layers), !tmpSame, len(c.tmp.layers), frozen); err != nil {
			if errors.Is(err, syscall.ENOTRECOVERABLE) {
				c.save()
				return driver.Checkpoint{}, err
			}
			if !wsSame {
				c.m.Layers = c.m.Layers[:len(c.m.Layers)-1]
			}
			if !tmpSame {
				c.tmp.layers = c.tmp.layers[:len(c.tmp.layers)-1]
			}
			c.m.Upper, c.tmp.upper = oldWS, oldTmp
			return driver.Checkpoint{}, err
		}
		// The frozen layers' bytes (nothing writes them any more).
		if !wsSame {
			size = treeSize(upper)
		}
		if !tmpSame {
			size += treeSize(c.tmp.host(filepath.Join(strconv.Itoa(oldTmp), "u")))
		}
	}
	e := ckptEntry{ID: newCheckpointID(), Time: time.Now().UTC(), N: len(c.m.Layers), Size: size}
	if turn >= 0 {
		e.Turns = []int{turn}
	}
	c.m.Checkpoints = append(c.m.Checkpoints, e)
	if c.tmp.on() {
		c.tmp.n[e.ID] = len(c.tmp.layers)
	}
	if len(c.m.Layers)+c.s.sharedDepth() >= maxLayers {
		if err := c.merge(len(c.m.Layers) / 2); err != nil {
			return driver.Checkpoint{}, err
		}
	}
	if c.tmp.on() && len(c.tmp.layers) >= maxLayers {
		if err := c.mergeTmp(len(c.tmp.layers) / 2); err != nil {
			return driver.Checkpoint{}, err
		}
	}
	c.prepareAhead()
	c.startBaseCopy()
	if err := c.save(); err != nil {
		return driver.Checkpoint{}, err
	}
	c.m.Checkpoints[len(c.m.Checkpoints)-1].Duration = time.Since(start)
	return c.info(c.m.Checkpoints[len(c.m.Checkpoints)-1]), nil
}

func (c *checkpoints) info(e ckptEntry) driver.Checkpoint {
	// Covers: the driver saves files; sandbox.Sandbox adds the processes
	// a ProcessCheckpointer saved (a kernel's fork template).
	// "files" is the workspace and the session's /tmp; "workspace" a
	// checkpoint whose /tmp went with an earlier session sandbox (or one
	// whose /tmp has a mount under it).
	covers := "workspace"
	if c.covers(e) {
		covers = "files"
	}
	return driver.Checkpoint{ID: driver.CheckpointID(e.ID), Time: e.Time, Size: e.Size, Layers: e.N, Covers: covers,
		Turns: slices.Clone(e.Turns), Duration: e.Duration}
}

// covers says whether checkpoint e saved the session's /tmp too (taken
// in the running session sandbox, whose /tmp is layered).
func (c *checkpoints) covers(e ckptEntry) bool {
	_, ok := c.tmp.n[e.ID]
	return ok && c.tmp.on()
}

// drop removes the checkpoints that keep says no to (merged away), with
// their /tmp records.
func (c *checkpoints) drop(keep func(e *ckptEntry) bool) {
	kept := c.m.Checkpoints[:0]
	for _, e := range c.m.Checkpoints {
		if keep(&e) {
			kept = append(kept, e)
		} else {
			delete(c.tmp.n, e.ID)
		}
	}
	c.m.Checkpoints = kept
}

func newCheckpointID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "ck-" + hex.EncodeToString(b)
}

func (c *checkpoints) find(id driver.CheckpointID) (int, error) {
	i := slices.IndexFunc(c.m.Checkpoints, func(e ckptEntry) bool { return e.ID == string(id) })
	if i < 0 {
		return 0, fmt.Errorf("local: checkpoint %q: %w; fix: pick one from sage session checkpoints", id, driver.ErrUnknownCheckpoint)
	}
	return i, nil
}

// Rollback makes the workspace checkpoint id's state: a new upper over
// its layers; the later layers and checkpoints are dropped and freed.
func (s *Sandbox) Rollback(ctx context.Context, id driver.CheckpointID) error {
	if s.gckpt != nil {
		return s.gckpt.rollback(ctx, id)
	}
	c, i, release, err := s.quietAt(ctx, "rollback", id)
	if err != nil {
		return err
	}
	defer release()
	e := c.m.Checkpoints[i]
	// A /tmp that is the checkpoint's already (nothing written since,
	// no layer above it) is left as it is: most rollbacks undo files.
	tmp := c.tmp.on() && !(c.tmp.upperEmpty() && c.tmpIs(e))
	if !tmp && e.N == len(c.m.Layers) && empty(filepath.Join(c.layerDir(c.m.Upper), "u")) {
		// The live state is the checkpoint's already (nothing written
		// since it, no layer above it): only the later checkpoints go.
		c.dropAfter(i)
		return c.save()
	}
	tn := c.tmpOf(e)
	old, oldTmp := c.m.Upper, c.tmp.upper
	if err := c.remount("rollback", true, e.N, tmp, tn, c.targets(true, tmp)); err != nil {
		if !errors.Is(err, syscall.ENOTRECOVERABLE) {
			c.m.Upper = old
			return err
		}
		tmp = false // the workspace is rolled back; /tmp goes with the session sandbox
	}
	for _, n := range c.m.Layers[e.N:] {
		c.freeLayer(n)
	}
	c.freeLayer(old)
	c.m.Layers = c.m.Layers[:e.N]
	if tmp {
		c.setTmpBase(e, oldTmp)
	}
	c.dropAfter(i)
	c.prepareAhead()
	return c.save()
}

// dropAfter drops the checkpoints after the i-th (a rollback to it).
func (c *checkpoints) dropAfter(i int) {
	for _, d := range c.m.Checkpoints[i+1:] {
		delete(c.tmp.n, d.ID)
	}
	c.m.Checkpoints = c.m.Checkpoints[:i+1]
}

// quietAt is op's start on checkpoint id: checkpoints on, no command
// running until release (s.quiet), and id's index in the manifest.
func (s *Sandbox) quietAt(ctx context.Context, op string, id driver.CheckpointID) (*checkpoints, int, func(), error) {
	if err := s.checkpointsOn(op); err != nil {
		return nil, 0, nil, err
	}
	release, err := s.quiet(ctx, op)
	if err != nil {
		return nil, 0, nil, err
	}
	i, err := s.ckpt.find(id)
	if err != nil {
		release()
		return nil, 0, nil, err
	}
	return s.ckpt, i, release, nil
}

// Checkpoints lists the checkpoints, oldest first.
func (s *Sandbox) Checkpoints(context.Context) ([]driver.Checkpoint, error) {
	if s.gckpt != nil {
		return s.gckpt.checkpoints(), nil
	}
	if err := s.checkpointsOn("checkpoints"); err != nil {
		return nil, err
	}
	c := s.ckpt
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]driver.Checkpoint, 0, len(c.m.Checkpoints))
	for _, e := range c.m.Checkpoints {
		out = append(out, c.info(e))
	}
	return out, nil
}

// Export copies checkpoint id's files into dir (empty or missing), for a
// fork: a read-only overlay of its layers, copied.
func (s *Sandbox) Export(ctx context.Context, id driver.CheckpointID, dir string) error {
	if s.gckpt != nil {
		return s.gckpt.export(ctx, id, dir)
	}
	if err := s.checkpointsOn("fork"); err != nil {
		return err
	}
	if err := emptyTarget(dir); err != nil {
		return err
	}
	c, i, release, err := s.quietAt(ctx, "fork", id)
	if err != nil {
		return err
	}
	defer release()
	if err := c.copyState(c.m.Checkpoints[i].N, dir, nil); err != nil {
		return err
	}
	return c.exportTmp(c.m.Checkpoints[i], dir)
}

// layersOwner is the owner the workspace's files are given on the host
// (the session's uid when sage is root), as package layers takes it; nil:
// the caller's own.
func (s *Sandbox) layersOwner() *layers.Owner {
	if o := s.ident.Owner(); o != nil {
		return &layers.Owner{UID: o.UID, GID: o.GID}
	}
	return nil
}

// copyState copies Base + Layers[:n] into dir.
func (c *checkpoints) copyState(n int, dir string, own *hostkit.FileOwner) error {
	var lo *layers.Owner
	if own != nil {
		lo = &layers.Owner{UID: own.UID, GID: own.GID}
	}
	lowers := c.stack(n)
	if len(lowers) == 1 {
		return layers.Copy(dir, lowers[0], lo)
	}
	v, err := c.agent.View(lowers)
	if err != nil {
		return fmt.Errorf("local: checkpoints: %w", err)
	}
	defer v.Close()
	if err := layers.Copy(dir, "/proc/self/fd/"+strconv.Itoa(int(v.Fd())), lo); err != nil {
		return fmt.Errorf("local: checkpoints: copy: %w", err)
	}
	return nil
}

// emptyTarget makes dir, or checks that it is an empty directory. Its
// files are this process's: the fork's sandbox picks its own uid (as
// root) and takes the folder as any new workspace.
func emptyTarget(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("local: fork workspace: %w", err)
	}
	if !empty(dir) || forkFolderInUse(dir) {
		return &fs.PathError{Op: "fork", Path: dir, Err: fmt.Errorf("%w: the fork's workspace folder is not empty; fix: name a new folder", fs.ErrExist)}
	}
	return nil
}

// merge folds the base and the n lowest layers into a new base, so the
// stack stays under overlayfs's 500 layers; the checkpoints inside the
// merged part expire.
func (c *checkpoints) merge(n int) error {
	nb, err := c.baseLayer(n)
	if err != nil {
		return err
	}
	// The live mount is rebuilt on the new base (its upper kept).
	oldBase, merged := c.m.Base, append([]int{}, c.m.Layers[:n]...)
	c.m.Base, c.m.Layers = nb, c.m.Layers[n:]
	old := c.m.Upper
	if err := c.remount("checkpoint", true, len(c.m.Layers), false, 0, []string{c.target}); err != nil {
		c.m.Base, c.m.Layers, c.m.Upper = oldBase, append(merged, c.m.Layers...), old
		c.freeLayer(nb)
		return err
	}
	// The upper of the mount just replaced was empty (a checkpoint was
	// just taken): nothing in it is lost.
	c.freeLayer(old)
	c.drop(func(e *ckptEntry) bool {
		e.N -= n
		return e.N >= 0
	})
	for _, l := range merged {
		c.freeLayer(l)
	}
	if oldBase != 0 {
		c.freeLayer(oldBase)
	} else {
		c.s.dropShared() // a fork: the new base is its own
	}
	c.dropBaseCopy() // the base is a layer now
	return nil
}

// Sync writes the live state into the host workspace folder
// (driver.Checkpointer), between commands, the mount frozen meanwhile.
func (s *Sandbox) Sync(ctx context.Context) error {
	if s.gckpt != nil { // the host folder is the live state already
		return nil
	}
	if err := s.checkpointsOn("sync"); err != nil {
		return err
	}
	release, err := s.quiet(ctx, "sync")
	if err != nil {
		return err
	}
	defer release()
	if err := s.ckpt.freeze("sync", s.ckpt.target); err != nil {
		return err
	}
	defer s.ckpt.thaw(s.ckpt.target)
	s.ckpt.dropBaseCopy() // a copy of the folder as it was
	if err := s.ckpt.writeBack(); err != nil {
		return err
	}
	return s.ckpt.forget()
}

// forget drops every checkpoint once the host folder received the live
// state: a checkpoint is its layers over the folder as it was, which the
// write-back changed. The layers stay mounted (the live view is the same:
// they only shadow what the folder now holds too) until the next start.
func (c *checkpoints) forget() error {
	c.m.Checkpoints = nil
	clear(c.tmp.n)
	return c.save()
}

// writeBack mirrors the live mount into the host folder.
func (c *checkpoints) writeBack() error {
	if err := layers.Mirror(c.s.hostWS, "/proc/self/fd/"+strconv.Itoa(c.fd), c.s.layersOwner()); err != nil {
		return fmt.Errorf("local: write the workspace back to %s: %w", c.s.hostWS, err)
	}
	return nil
}

// closeCheckpoints runs in Close once the session sandbox stopped: the
// live state is written back into the host folder (the mount lives on
// through its descriptor), then the agent, the descriptor, the layers and
// the checkpoints go. Without a Close (the process killed) all stay, and
// the next start mounts them again.
func (s *Sandbox) closeCheckpoints() error {
	if s.gckpt != nil {
		return s.gckpt.close()
	}
	c := s.ckpt
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	keep := c.served != nil && c.hasTurns()
	if keep {
		err = c.ownBase()
	}
	c.dropBaseCopy() // (unless ownBase took it) the folder is written now
	if c.served != nil && err == nil {
		err = c.writeBack()
	}
	c.dropAhead()
	if c.agent != nil {
		c.agent.Close()
		c.agent = nil
	}
	c.cur.Close()
	c.tmp.close()
	os.Remove(c.tmp.dir) // made again by the next start
	if keep && err == nil {
		// The agent's turns stay (keepTurns): the layers stand on a copy
		// of the base, and the folder's fingerprint says whether the next
		// start may keep them.
		c.m.Folder, err = folderPrint(c.s.hostWS)
		if err == nil {
			err = c.slots.final(c.dir, &c.m)
		}
	} else if c.served != nil && err == nil {
		// The folder is the live state now: the next start begins afresh
		// on it (the checkpoints were layers over the folder as it was).
		for _, n := range append([]int{c.m.Base, c.m.Upper}, c.m.Layers...) {
			if n != 0 {
				c.freeLayer(n)
			}
		}
		next := c.m.Next
		c.m = manifest{Next: next}
		if serr := c.slots.final(c.dir, &c.m); serr != nil {
			err = serr
		}
	}
	c.slots.close()
	c.dropSpare()
	c.bg.Wait()
	// Overlayfs's work directories (mode 0) are opened up, so that the
	// runtime directory can be removed like any other.
	if ents, rerr := os.ReadDir(c.dir); rerr == nil {
		for _, e := range ents {
			if e.IsDir() {
				os.Chmod(filepath.Join(c.dir, e.Name(), "w", "work"), 0o700)
			}
		}
	}
	return err
}

// treeSize is the bytes of the regular files under dir.
func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// asFSUID runs f on a locked thread whose file-system uid and gid are
// uid and gid; the thread is given back as root, or ended when that fails.
func asFSUID(uid, gid int, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		unix.Setfsgid(gid)
		unix.Setfsuid(uid)
		err := f()
		unix.Setfsuid(0)
		unix.Setfsgid(0)
		if fsuid() == 0 {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// fsuid is the calling thread's file-system uid (setfsuid(-1) changes
// nothing and returns it).
func fsuid() int {
	r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	return int(r)
}

// CheckpointsSummary says whether this machine can keep a workspace and
// /tmp as layers (sandbox.local.checkpoints: on) and what a checkpoint covers, for
// sage doctor: overlayfs, and Linux 6.5+ for MOVE_MOUNT_BENEATH (the
// fsconfig lowerdir+ of 6.8 too).
func CheckpointsSummary() (string, error) {
	fsys, _ := os.ReadFile("/proc/filesystems")
	if !strings.Contains(string(fsys), "\toverlay\n") {
		return "", errors.New("overlayfs is not available; fix: modprobe overlay (or a kernel with CONFIG_OVERLAY_FS)")
	}
	var u unix.Utsname
	unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	fmt.Sscanf(rel, "%d.%d", &major, &minor)
	if major < 6 || major == 6 && minor < 8 {
		return "", fmt.Errorf("this kernel (Linux %s) lacks what checkpoints use (overlayfs lowerdir+ of 6.8, MOVE_MOUNT_BENEATH of 6.5); fix: Linux 6.8 or later", rel)
	}
	return "the workspace's files and the session's /tmp are saved and restored (bwrap session sandbox, Linux " + rel +
		"; /tmp only while the session sandbox that took the checkpoint runs: a restart empties /tmp, and older checkpoints then cover the workspace only); " +
		"process state: only the Python kernels of sage sandboxd's /v1/jupyter and /v1/code (fork template; a rollback stops the kernels it cannot restore); " +
		"not restored: background tasks and other processes (they run on), Node kernels (stopped); " +
		"under isolation gvisor a checkpoint saves every process instead (see gvisor checkpoints)", nil
}

// taskCount counts the background tasks among l's uses.
func (l *liveSession) taskCount(d int) {
	l.mu.Lock()
	l.tasks += d
	l.mu.Unlock()
}

// hasTurns says whether a checkpoint ends an agent turn: then Close keeps
// the checkpoints (keepTurns), so that sage session rollback --turn works
// after the run.
func (c *checkpoints) hasTurns() bool {
	return slices.ContainsFunc(c.m.Checkpoints, func(e ckptEntry) bool { return len(e.Turns) > 0 })
}

// baseLayer makes a new layer holding the state of the base and the
// first n layers (copyState), owned by the sandbox's uid as every layer.
func (c *checkpoints) baseLayer(n int) (int, error) {
	nb, err := c.newLayer()
	if err != nil {
		return 0, err
	}
	if err := c.copyState(n, filepath.Join(c.layerDir(nb), "u"), nil); err != nil {
		c.freeLayer(nb)
		return 0, err
	}
	if id := c.s.ident; id != nil {
		filepath.WalkDir(filepath.Join(c.layerDir(nb), "u"), func(p string, _ fs.DirEntry, _ error) error {
			os.Lchown(p, id.UID, id.GID)
			return nil
		})
	}
	return nb, nil
}

// ownBase gives the layers a base of their own, a copy of the host folder
// they stand on, before the folder receives the live state (Close keeping
// the agent's turns) or a fork stands on them. A base that is a layer
// already costs nothing, nor one copied ahead (startBaseCopy).
func (c *checkpoints) ownBase() error {
	if c.m.Base != 0 {
		return nil
	}
	if n, ok := c.takeBaseCopy(); ok {
		c.m.Base = n
		return nil
	}
	nb, err := c.baseLayer(0)
	if err != nil {
		return err
	}
	c.m.Base = nb
	return nil
}

// resume runs at the start of a sandbox whose last Close kept the agent's
// turns: they stay while the host folder is what that Close wrote; a
// folder changed since (edited on the host) wins, and the checkpoints
// and their layers are dropped, so that no edit is shadowed or written
// over.
func (c *checkpoints) resume() error {
	print, err := folderPrint(c.s.hostWS)
	if err != nil {
		return err
	}
	if print != c.m.Folder {
		for _, n := range append([]int{c.m.Base, c.m.Upper}, c.m.Layers...) {
			if n != 0 {
				c.freeLayer(n)
			}
		}
		c.m = manifest{Next: c.m.Next}
	}
	c.m.Folder = ""
	return c.save()
}

// folderPrint is a digest of the tree at dir: each entry's path, type,
// mode, size, modification time and link target.
func folderPrint(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		link := ""
		if d.Type()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		fmt.Fprintf(h, "%q %o %d %d %q\n", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), link)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("local: the workspace folder %s: %w", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// baseCopy is the host folder being copied into a layer in the
// background, for the first fork (which must not stand on the folder,
// written at Close and Sync): made after the first checkpoint of a
// sandbox that asked for a fork pool (Options.ForkPool > 0), so that the
// first fork costs a mount rather than a copy of the workspace.
type baseCopy struct {
	n    int
	done chan struct{}
	err  error // set before done closes
}

// startBaseCopy starts copying the host folder into a new layer, unless
// the base is one already, a copy runs, or no fork pool was asked for.
// The folder is not written while the sandbox runs but by Sync and
// Close, which wait for the copy and drop it first (dropBaseCopy).
func (c *checkpoints) startBaseCopy() {
	if c.m.Base != 0 || c.base != nil || c.s.shared() || c.s.forks.size <= 0 || c.s.spareUntaken() {
		return
	}
	bc := &baseCopy{n: c.m.Next, done: make(chan struct{})}
	c.m.Next++
	c.base = bc
	src, id := c.s.bindWS, c.s.ident
	c.bg.Go(func() {
		defer close(bc.done)
		if bc.err = c.makeLayer(bc.n); bc.err != nil {
			return
		}
		u := filepath.Join(c.layerDir(bc.n), "u")
		if bc.err = layers.Copy(u, src, nil); bc.err != nil {
			return
		}
		if id != nil {
			filepath.WalkDir(u, func(p string, _ fs.DirEntry, _ error) error {
				os.Lchown(p, id.UID, id.GID)
				return nil
			})
		}
	})
}

// takeBaseCopy is the layer the host folder was copied into ahead, once
// copied (ok false: none, or the copy failed and is freed).
func (c *checkpoints) takeBaseCopy() (n int, ok bool) {
	bc := c.base
	if bc == nil {
		return 0, false
	}
	c.base = nil
	<-bc.done
	if bc.err != nil {
		c.freeLayer(bc.n)
		return 0, false
	}
	return bc.n, true
}

// dropBaseCopy frees the copy made ahead (the folder is about to change,
// or the base is a layer now).
func (c *checkpoints) dropBaseCopy() {
	if n, ok := c.takeBaseCopy(); ok {
		c.freeLayer(n)
	}
}
