//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/isolation"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/layers"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/supervisor"
)

// Checkpoints of a gVisor session sandbox (isolation gvisor, checkpoints
// on). A checkpoint is taken between commands, with the sandbox paused
// (runsc pause: no process inside runs): a copy of the host workspace
// folder (bytes, modes, links, modification times), then runsc checkpoint
// --leave-running of the whole sandbox (every process, its memory,
// gVisor's memory-backed root overlay, the session's /tmp included) into
// an image, then runsc resume. The two are so of the same instant.
//
// A rollback stops the session sandbox, makes the host folder the copy's
// state again (layers.Mirror: what matches stays, the rest is rewritten or
// removed), and starts the sandbox again from the image with runsc
// restore, under a new container id, on a new control socket: runsc
// restore hands the sandbox its own stdin, which is why the
// control socket of such a session is runsc's stdin and not a
// descriptor donated with --pass-fd, which restore cannot hand back
// (gvisorSessionLaunch). The processes go on from the checkpoint: a
// shell's loop counts on from where it was, a Python's variables are
// there, /tmp is the checkpoint's.
//
// The workspace is not in the image (the gofer serves it from the host
// folder, read afresh at restore), and the host folder stays the live
// state: host file operations work on it as without checkpoints, and
// Sync has nothing to do.
//
// Files only: gVisor saves no file backed by a host descriptor, and a
// command's stdio pipes are (the host sends them in). A checkpoint is
// refused while a command runs (ErrCommandRunning, as under bwrap); while
// a background task or a resident command (a Python kernel of sandboxd)
// runs, or when runsc checkpoint fails "not savable" (a process left in
// the background, "cmd &", holds a command's stdio), the checkpoint is of
// the files only: the copy, taken paused, no image; Covers "files" (the
// core adds the kernels by their fork template). A rollback to it makes
// the host folder the copy's state with the sandbox paused and resumes
// it: the processes go on. A rollback to an image while a task runs is
// refused (the restart would end it). A rollback whose restore fails leaves
// the restored files and no session sandbox (the next command starts a
// fresh one), and says so. The network must be off (no host socket in the sandbox). At
// most maxGvisorCheckpoints are kept: an image holds the sandbox's memory
// (0.3 MB for an idle shell, 80 MB for a Python holding 80 MB), and the
// oldest is dropped past it.

// maxGvisorCheckpoints bounds the live checkpoints of a gVisor session;
// past it the oldest is dropped (a test lowers it).
var maxGvisorCheckpoints = 8

type gvisorCheckpoints struct {
	mu   sync.Mutex
	s    *Sandbox
	g    *isolation.Gvisor
	dir  string // runtimeDir/gvisor/checkpoints: one directory per checkpoint
	list []gvisorCkpt
}

// gvisorCkpt is one checkpoint: in dir, ws (the workspace's copy), image
// (runsc's) and the spec of the sandbox it was taken of.
type gvisorCkpt struct {
	info  driver.Checkpoint
	dir   string
	spec  []byte
	binds []bind // the session sandbox's extra binds (its spec has them)
	next  uint64 // the session's next command id: the restored supervisor remembers the earlier ones
	// filesOnly: no image (a background task, a resident command or a
	// process holding a command's stdio ran): a rollback mirrors the
	// files back and the processes go on.
	filesOnly bool
}

// gvisorProcesses is what a gVisor checkpoint saves besides the files.
const gvisorProcesses = "gvisor: all processes (the session sandbox's memory, /tmp included)"

// setupGvisorCheckpoints turns checkpoints on for a gVisor session
// sandbox, or says which setting stops them.
func (s *Sandbox) setupGvisorCheckpoints(cfg driver.Config, g *isolation.Gvisor) error {
	refuse := func(reason string) error {
		return &driver.ConfigError{Field: "sandbox.local.checkpoints", Value: "on", Reason: reason}
	}
	if !s.sess.opts.Enabled {
		return refuse("checkpoints under isolation gvisor need its session sandbox (runsc checkpoint saves one sandbox); " +
			"fresh_per_command gives each command a sandbox of its own; fix: drop fresh_per_command, or turn checkpoints off")
	}
	if g.Network() != driver.NetworkOff {
		return refuse(fmt.Sprintf("checkpoints under isolation gvisor need network off (network %s puts host sockets in the sandbox, "+
			"which runsc restore cannot hand back); fix: sandbox.local.network: off, isolation bwrap, or turn checkpoints off", g.Network()))
	}
	// Beside the gVisor directory, not in it: a sandbox over this runtime
	// directory after a kill -9 sweeps that one, and finds these again.
	c := &gvisorCheckpoints{s: s, g: g, dir: filepath.Join(s.runtimeDir, "gvisor-checkpoints")}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("local: gvisor checkpoints: %w", err)
	}
	c.load()
	g.SetStdioControl()
	s.gckpt = c
	return nil
}

// runsc runs one runsc command on the session's state and says how long
// it took; its error quotes runsc's telling line.
func (c *gvisorCheckpoints) runsc(ctx context.Context, args ...string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out := driver.NewBoundedBuffer(128 << 10) // runsc's head and tail: its telling line is among them
	runsc, flags := c.g.Runsc()
	cmd := exec.CommandContext(ctx, runsc, append(flags, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		return time.Since(start), fmt.Errorf("local: runsc %s: %w: %s", args[0], err, runscErrorLine(string(out.Bytes())))
	}
	return time.Since(start), nil
}

// gquiet takes the gVisor session between commands: the slot's lock is
// held until release, no command runs (as under bwrap, background tasks
// and resident commands such as the Python kernels may: tasks counts
// them). l is the running session sandbox (started when start is set),
// nil when none runs.
func (s *Sandbox) gquiet(ctx context.Context, op string, start bool) (l *liveSession, tasks int, release func(), err error) {
	if start {
		ls, _, err := s.session(ctx, nil)
		if err != nil {
			return nil, 0, nil, err
		}
		ls.idle()
	}
	s.sess.mu.Lock()
	if s.sess.closed {
		s.sess.mu.Unlock()
		return nil, 0, nil, fmt.Errorf("local: %s: %w", op, driver.ErrClosed)
	}
	l = s.sess.live
	if l != nil {
		select {
		case <-l.gone():
			l.stop()
			s.sess.live, l = nil, nil
		default:
		}
	}
	if l == nil && start {
		s.sess.mu.Unlock()
		return nil, 0, nil, fmt.Errorf("local: %s: the gVisor session sandbox ended as it started; see session.log in %s", op, s.runtimeDir)
	}
	if l != nil {
		l.mu.Lock()
		busy := l.busy - l.tasks
		tasks = l.tasks
		l.mu.Unlock()
		if busy > 0 {
			s.sess.mu.Unlock()
			return nil, 0, nil, fmt.Errorf("local: %s: %w; fix: wait for it to end or stop it", op, driver.ErrCommandRunning)
		}
	}
	c := s.gckpt
	c.mu.Lock()
	return l, tasks, func() { c.mu.Unlock(); s.sess.mu.Unlock() }, nil
}

// checkpoint is Checkpoint under gVisor (turn -1: none).
func (c *gvisorCheckpoints) checkpoint(ctx context.Context, turn int) (_ driver.Checkpoint, err error) {
	start := time.Now()
	l, tasks, release, err := c.s.gquiet(ctx, "checkpoint", true)
	if err != nil {
		return driver.Checkpoint{}, err
	}
	// A background task's or a resident command's (a Python kernel's)
	// stdio are pipes from the host, which gVisor cannot save: while one
	// runs the checkpoint is of the files only (filesOnly).
	filesOnly := tasks > 0
	defer release()
	id := newCheckpointID()
	dir := filepath.Join(c.dir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	spec, err := c.g.Spec(l.w.Container)
	if err != nil {
		return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o700); err != nil {
		return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: %w", err)
	}
	// Paused, nothing inside changes the workspace or its memory: the
	// copy and the image are of one instant.
	if _, err := c.runsc(ctx, "pause", l.w.Container); err != nil {
		return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: %w", err)
	}
	resumed := false
	resume := func() error {
		if resumed {
			return nil
		}
		resumed = true
		_, err := c.runsc(context.WithoutCancel(ctx), "resume", l.w.Container)
		return err
	}
	defer func() {
		if rerr := resume(); rerr != nil {
			// A sandbox that cannot go on is stopped: the next command
			// starts a new one.
			c.s.sess.live = nil
			l.stop()
			if err == nil {
				err = fmt.Errorf("local: checkpoint: %w; the session sandbox was stopped", rerr)
			}
		}
	}()
	if err := layers.Copy(filepath.Join(dir, "ws"), c.s.bindWS, nil); err != nil {
		return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: copy the workspace: %w", err)
	}
	if !filesOnly {
		image := filepath.Join(dir, "image")
		if err := os.Mkdir(image, 0o700); err != nil {
			return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: %w", err)
		}
		if _, err := c.runsc(ctx, "checkpoint", "--leave-running", "--image-path="+image, l.w.Container); err != nil {
			if !strings.Contains(err.Error(), "not savable") {
				return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: %w", err)
			}
			// gVisor saves no file backed by a host descriptor: a
			// command's stdio pipes, held by a process it left in the
			// background. The copy, taken paused, is still of this
			// instant: the checkpoint is of the files only.
			if err := os.RemoveAll(image); err != nil {
				return driver.Checkpoint{}, fmt.Errorf("local: checkpoint: %w", err)
			}
			filesOnly = true
		}
	}
	if err := resume(); err != nil {
		return driver.Checkpoint{}, err // the deferred resume stops it
	}
	l.mu.Lock()
	next := l.next
	l.mu.Unlock()
	info := driver.Checkpoint{ID: driver.CheckpointID(id), Time: time.Now().UTC(), Size: treeSize(dir), Covers: "files+processes",
		Processes: []string{gvisorProcesses}}
	if filesOnly {
		info.Covers, info.Processes = "files", nil
	}
	if turn >= 0 {
		info.Turns = []int{turn}
	}
	info.Duration = time.Since(start)
	e := gvisorCkpt{info: info, dir: dir, spec: spec, binds: slices.Clone(l.binds), next: next, filesOnly: filesOnly}
	if err := e.save(); err != nil {
		return driver.Checkpoint{}, err
	}
	c.list = append(c.list, e)
	for len(c.list) > maxGvisorCheckpoints {
		os.RemoveAll(c.list[0].dir)
		c.list = slices.Delete(c.list, 0, 1)
	}
	return info, nil
}

// gvisorMeta is a checkpoint's meta.json, written last (its presence
// says the checkpoint is whole): what a process started after this one
// was killed with -9 needs to roll back to it.
type gvisorMeta struct {
	Info      driver.Checkpoint `json:"info"`
	Spec      []byte            `json:"spec"`
	Binds     []bind            `json:"binds"`
	Next      uint64            `json:"next"`
	FilesOnly bool              `json:"files_only"`
}

// maxGvisorMeta bounds a meta.json read back (a spec is a few KB).
const maxGvisorMeta = 1 << 20

func (e gvisorCkpt) save() error {
	b, err := json.Marshal(gvisorMeta{Info: e.info, Spec: e.spec, Binds: e.binds, Next: e.next, FilesOnly: e.filesOnly})
	if err == nil {
		tmp := filepath.Join(e.dir, "meta.json.tmp")
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, filepath.Join(e.dir, "meta.json"))
		}
	}
	if err != nil {
		return fmt.Errorf("local: checkpoint: record it: %w", err)
	}
	return nil
}

// load finds the checkpoints an earlier process over this runtime
// directory took (it was killed with -9, or its Close kept them for an
// agent's turns), oldest first, and removes what is not a whole checkpoint (a kill in the middle
// of one) and what is past the bound.
func (c *gvisorCheckpoints) load() {
	ents, _ := os.ReadDir(c.dir)
	for _, d := range ents {
		dir := filepath.Join(c.dir, d.Name())
		var m gvisorMeta
		f, err := os.Open(filepath.Join(dir, "meta.json"))
		if err == nil {
			err = json.NewDecoder(io.LimitReader(f, maxGvisorMeta)).Decode(&m)
			f.Close()
		}
		if err != nil || !d.IsDir() || string(m.Info.ID) != d.Name() {
			os.RemoveAll(dir)
			continue
		}
		c.list = append(c.list, gvisorCkpt{info: m.Info, dir: dir, spec: m.Spec, binds: m.Binds, next: m.Next, filesOnly: m.FilesOnly})
	}
	slices.SortFunc(c.list, func(a, b gvisorCkpt) int { return a.info.Time.Compare(b.info.Time) })
	for len(c.list) > maxGvisorCheckpoints {
		os.RemoveAll(c.list[0].dir)
		c.list = slices.Delete(c.list, 0, 1)
	}
}

func (c *gvisorCheckpoints) find(id driver.CheckpointID) (int, error) {
	i := slices.IndexFunc(c.list, func(e gvisorCkpt) bool { return e.info.ID == id })
	if i < 0 {
		return 0, fmt.Errorf("local: checkpoint %q: %w; fix: pick one from sage session checkpoints", id, driver.ErrUnknownCheckpoint)
	}
	return i, nil
}

// rollback is Rollback under gVisor: the session sandbox stopped, the
// workspace made the checkpoint's copy again, the sandbox restored from
// its image on a new control socket.
func (c *gvisorCheckpoints) rollback(ctx context.Context, id driver.CheckpointID) error {
	// A checkpoint of an earlier process (killed with -9): its image's
	// spec binds host files this process makes as it starts a session
	// sandbox (the supervisor's reachable copy...), so one is started
	// first, and replaced by the restore.
	c.s.sess.mu.Lock()
	fresh := c.s.sess.started == 0
	c.s.sess.mu.Unlock()
	l, tasks, release, err := c.s.gquiet(ctx, "rollback", fresh)
	if err != nil {
		return err
	}
	defer release()
	i, err := c.find(id)
	if err != nil {
		return err
	}
	e := c.list[i]
	if e.filesOnly {
		return c.rollbackFiles(ctx, l, i)
	}
	if tasks > 0 {
		return fmt.Errorf("local: rollback: %w: checkpoint %s saved every process, and restoring it restarts the session sandbox, "+
			"which would end the %d background task(s) or Python kernel(s) running now (their stdio from the host cannot be handed back); "+
			"fix: wait for them to end or stop them, or roll back to a later checkpoint taken while they ran (covers files)",
			driver.ErrCommandRunning, id, tasks)
	}
	if l != nil {
		c.s.sess.live = nil
		l.stop()
	}
	if err := layers.Mirror(c.s.bindWS, filepath.Join(e.dir, "ws"), c.s.layersOwner()); err != nil {
		return fmt.Errorf("local: rollback: the workspace: %w; the session sandbox was stopped (its next command starts a new one)", err)
	}
	for _, d := range c.list[i+1:] {
		os.RemoveAll(d.dir)
	}
	c.list = c.list[:i+1]
	nl, err := c.restore(ctx, e)
	if err != nil {
		return fmt.Errorf("local: rollback: the files are the checkpoint's, the processes are not: %w; the next command starts a new session sandbox", err)
	}
	c.s.sess.live = nl
	c.s.sess.started++
	if d := c.s.sess.opts.idle(); d > 0 {
		c.s.armIdle(nl, d)
	}
	return nil
}

// rollbackFiles is a rollback to the files-only checkpoint c.list[i]:
// the workspace made its copy again with the sandbox paused (l, when one
// runs), which then resumes: its processes go on.
func (c *gvisorCheckpoints) rollbackFiles(ctx context.Context, l *liveSession, i int) (err error) {
	e := c.list[i]
	if l != nil {
		if _, err := c.runsc(ctx, "pause", l.w.Container); err != nil {
			return fmt.Errorf("local: rollback: %w; nothing changed", err)
		}
		defer func() {
			if _, rerr := c.runsc(context.WithoutCancel(ctx), "resume", l.w.Container); rerr != nil {
				c.s.sess.live = nil
				l.stop()
				err = errors.Join(err, fmt.Errorf("local: rollback: %w; the session sandbox was stopped (its next command starts a new one)", rerr))
			}
		}()
	}
	if err := layers.Mirror(c.s.bindWS, filepath.Join(e.dir, "ws"), c.s.layersOwner()); err != nil {
		return fmt.Errorf("local: rollback: the workspace: %w", err)
	}
	for _, d := range c.list[i+1:] {
		os.RemoveAll(d.dir)
	}
	c.list = c.list[:i+1]
	return nil
}

// restore starts the session sandbox again from e's image (runsc
// restore) and waits until its supervisor answers on the new socket.
func (c *gvisorCheckpoints) restore(ctx context.Context, e gvisorCkpt) (*liveSession, error) {
	w, err := c.g.RestoreWrap(e.spec, filepath.Join(e.dir, "image"))
	if err != nil {
		return nil, err
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		w.Done()
		return nil, fmt.Errorf("local: session control socket: %w", err)
	}
	host, inside := os.NewFile(uintptr(sp[0]), "session-control"), os.NewFile(uintptr(sp[1]), "session-control")
	defer host.Close()
	defer inside.Close()
	log, err := openSessionLog(filepath.Join(c.s.runtimeDir, "session.log"))
	if err != nil {
		w.Done()
		return nil, err
	}
	defer log.w.Close()
	cmd := &exec.Cmd{Path: w.Path, Args: w.Args, Dir: w.Dir, Env: w.Env, Stdin: inside, Stdout: log.w, Stderr: log.w}
	cmd.SysProcAttr = w.SysProcAttr()
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		log.abandon()
		w.Done()
		return nil, fmt.Errorf("local: runsc restore: %w", err)
	}
	log.start()
	conn, err := net.FileConn(host)
	if err != nil {
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		cmd.Wait()
		w.Done()
		return nil, fmt.Errorf("local: session control socket: %w", err)
	}
	nl := &liveSession{cmd: cmd, w: w, conn: conn.(*net.UnixConn), binds: slices.Clone(e.binds), used: time.Now(), log: log,
		waits: map[uint64]chan supervisor.Reply{}, dead: make(chan struct{}), next: e.next}
	nl.wsDev, nl.wsIno, _ = workspaceID(c.s)
	go nl.read()
	if err := nl.pong(); err != nil {
		nl.stop()
		return nil, fmt.Errorf("local: runsc restore: %w", err)
	}
	return nl, nil
}

// list is Checkpoints under gVisor.
func (c *gvisorCheckpoints) checkpoints() []driver.Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]driver.Checkpoint, 0, len(c.list))
	for _, e := range c.list {
		out = append(out, e.info)
	}
	return out
}

// export copies checkpoint id's workspace into dir (a fork's: its files
// only; the fork starts its own processes).
func (c *gvisorCheckpoints) export(ctx context.Context, id driver.CheckpointID, dir string) error {
	if err := emptyTarget(dir); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i, err := c.find(id)
	if err != nil {
		return err
	}
	if err := layers.Copy(dir, filepath.Join(c.list[i].dir, "ws"), nil); err != nil {
		return fmt.Errorf("local: fork: copy checkpoint %s: %w", id, err)
	}
	return nil
}

// close runs in Close, once the session sandbox stopped. When one of the
// checkpoints is of an agent's turn and the runtime directory is the
// sandbox's name's (not an anonymous one that Close removes), they all
// stay, as bwrap's do, for `sage session rollback --turn` after the run:
// each is whole in its directory (the workspace's copy, the image, the
// spec), and the next sandbox over this runtime directory lists them
// (load) and rolls back to one, its processes from the image, as after a
// kill -9. Otherwise every checkpoint is removed: images and copies.
func (c *gvisorCheckpoints) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	turns := slices.ContainsFunc(c.list, func(e gvisorCkpt) bool { return len(e.info.Turns) > 0 })
	c.list = nil
	if turns && !c.s.ownRuntime {
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("local: remove the gVisor checkpoints: %w", err)
	}
	return nil
}
