//go:build linux

package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/layers"
)

// tmpTarget is the session's /tmp inside the sandbox.
const tmpTarget = "/tmp"

// tmpLayers is the session's /tmp as overlay layers, as the workspace is,
// but in memory: in a tmpfs of the size of the session's /tmp
// (limits.TmpBytes), which the agent mounts in its own mount namespace
// (the sandboxed code never sees it) and which lives as long as the
// session sandbox, as /tmp always did. The frozen layers of /tmp count
// against that size. Nothing of it is in the manifest: a new session
// sandbox (its idle stop, a crash, the daemon killed) starts with an empty
// /tmp, and the checkpoints taken before cover the workspace only from
// then on (docs/checkpoints.md, "The session's /tmp").
type tmpLayers struct {
	store *os.File // the tmpfs's root, on the host's side; nil: /tmp is the session sandbox's plain tmpfs
	dir   string   // where the agent mounted it (its namespace only): layer paths in requests
	mode  fs.FileMode
	next  int
	// layers are the frozen ones, bottom first, over the base: e in the
	// store (empty), b (a fork's /tmp), or a merged layer's u; upper
	// takes the writes since the last checkpoint.
	base   string
	layers []int
	upper  int
	// n is, for each checkpoint taken in this session sandbox, how many
	// of layers its /tmp is; a checkpoint missing from it covers the
	// workspace only.
	n map[string]int
}

func (t *tmpLayers) on() bool { return t.store != nil }

// host is rel inside the store as the host reaches it.
func (t *tmpLayers) host(rel string) string {
	return filepath.Join("/proc/self/fd", strconv.Itoa(int(t.store.Fd())), rel)
}

// stack is the lowers of the base and layers[:n], topmost first, as the
// agent sees them; n < 0 is an empty /tmp (e in the store).
func (t *tmpLayers) stack(n int) []string {
	if n < 0 {
		return []string{filepath.Join(t.dir, "e")}
	}
	out := make([]string, 0, n+1)
	for i := n - 1; i >= 0; i-- {
		out = append(out, filepath.Join(t.dir, strconv.Itoa(t.layers[i]), "u"))
	}
	return append(out, filepath.Join(t.dir, t.base))
}

func (t *tmpLayers) upperEmpty() bool {
	return !t.on() || empty(t.host(filepath.Join(strconv.Itoa(t.upper), "u")))
}

// close forgets the store (its session sandbox is gone or going).
func (t *tmpLayers) close() {
	if t.store != nil {
		t.store.Close()
	}
	*t = tmpLayers{dir: t.dir}
}

// startTmp layers the new session sandbox's /tmp (attach): a store, its
// empty base (or a fork's /tmp, left by Export), no layers yet. A session
// sandbox with a mount under /tmp keeps its plain /tmp: an overlay there
// would hide the mount; its checkpoints cover the workspace only.
func (c *checkpoints) startTmp(a *layers.Agent) error {
	t := &c.tmp
	t.close()
	store, mode, err := a.Store(tmpTarget, t.dir, c.s.limits.TmpBytes)
	if errors.Is(err, syscall.ENOTEMPTY) {
		slog.Debug("local sandbox: the session's /tmp is not layered (its checkpoints cover the workspace only)", "why", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("local: checkpoints of /tmp: %w", err)
	}
	t.store, t.mode, t.next, t.base, t.n = store, mode, 1, "e", map[string]int{}
	err = c.asOwner(func() error {
		if err := os.Mkdir(t.host("e"), t.mode.Perm()); err != nil {
			return err
		}
		return os.Chmod(t.host("e"), t.mode)
	})
	if err != nil {
		t.close()
		return fmt.Errorf("local: checkpoints of /tmp: %w", err)
	}
	seed := filepath.Join(c.dir, "tmp-seed")
	if _, err := os.Lstat(seed); err == nil {
		err := c.importSeed(a, seed)
		removeLayer(seed)
		if err != nil {
			t.close()
			return err
		}
		t.base = "b"
	}
	return nil
}

// importSeed copies a fork's /tmp into the base, by the agent: the
// tmpfs takes only the sandbox's uids, and the agent has their rights
// over the seed once it is theirs.
func (c *checkpoints) importSeed(a *layers.Agent, seed string) error {
	if id := c.s.ident; id != nil {
		filepath.WalkDir(seed, func(p string, _ fs.DirEntry, _ error) error {
			os.Lchown(p, id.UID, id.GID)
			return nil
		})
	}
	b := c.tmp.host("b")
	if err := c.asOwner(func() error { return os.Mkdir(b, 0o700) }); err != nil {
		return fmt.Errorf("local: the fork's /tmp: %w", err)
	}
	if err := a.CopyIn(filepath.Join(c.tmp.dir, "b"), []string{seed}); err != nil {
		return fmt.Errorf("local: the fork's /tmp: %w", err)
	}
	if err := os.Chmod(b, c.tmp.mode); err != nil {
		return fmt.Errorf("local: the fork's /tmp: %w", err)
	}
	return nil
}

// newTmpLayer makes an empty layer in the store, the sandbox uid's; its
// u has /tmp's mode (the overlay's root takes the upper's).
func (c *checkpoints) newTmpLayer() (int, error) {
	t := &c.tmp
	n := t.next
	t.next++
	d := strconv.Itoa(n)
	err := c.asOwner(func() error {
		for _, p := range []string{d, filepath.Join(d, "u"), filepath.Join(d, "w")} {
			if err := os.Mkdir(t.host(p), 0o700); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = os.Chmod(t.host(filepath.Join(d, "u")), t.mode)
	}
	if err != nil {
		c.freeTmpLayer(n)
		return 0, fmt.Errorf("local: checkpoint layer of /tmp: %w", err)
	}
	return n, nil
}

func (c *checkpoints) freeTmpLayer(n int) {
	if c.tmp.on() && n != 0 {
		removeLayer(c.tmp.host(strconv.Itoa(n)))
	}
}

// asOwner runs f with the sandbox's uid as the file-system uid (as
// root): a tmpfs of the sandbox's user namespace refuses to create files
// for uids it does not map.
func (c *checkpoints) asOwner(f func() error) error {
	if id := c.s.ident; id != nil {
		return asFSUID(id.UID, id.GID, f)
	}
	return f()
}

// tmpOf is how many /tmp layers checkpoint e's state stacks; -1 for one
// that does not cover /tmp: a rollback to it empties /tmp, as the
// restart that lost its /tmp did.
func (c *checkpoints) tmpOf(e ckptEntry) int {
	if n, ok := c.tmp.n[e.ID]; ok {
		return n
	}
	return -1
}

// tmpIs says whether the live /tmp, its upper empty, is checkpoint e's.
func (c *checkpoints) tmpIs(e ckptEntry) bool {
	t := &c.tmp
	if !t.on() {
		return true // not layered: no checkpoint covers it
	}
	n := c.tmpOf(e)
	return n == len(t.layers) || n < 0 && len(t.layers) == 0 && t.base == "e"
}

// setTmpBase is the end of a rollback of /tmp to checkpoint e: the
// layers above its state are freed; an empty /tmp (a checkpoint that
// does not cover it) frees them all and the base too.
func (c *checkpoints) setTmpBase(e ckptEntry, oldUpper int) {
	t := &c.tmp
	n := c.tmpOf(e)
	c.freeTmpLayer(oldUpper)
	if n >= 0 {
		for _, l := range t.layers[n:] {
			c.freeTmpLayer(l)
		}
		t.layers = t.layers[:n]
		return
	}
	for _, l := range t.layers {
		c.freeTmpLayer(l)
	}
	t.layers = nil
	c.freeTmpBase(t.base)
	t.base = "e"
}

// freeTmpBase removes a base no mount stands on any longer (e stays).
func (c *checkpoints) freeTmpBase(base string) {
	switch base {
	case "e":
	case "b":
		removeLayer(c.tmp.host("b"))
	default:
		removeLayer(c.tmp.host(filepath.Dir(base)))
	}
}

// mergeTmp folds /tmp's base and its n lowest layers into a new base, as
// merge does for the workspace; the checkpoints whose /tmp is inside the
// merged part expire.
func (c *checkpoints) mergeTmp(n int) error {
	t := &c.tmp
	nb, err := c.newTmpLayer()
	if err != nil {
		return err
	}
	if err := c.agent.CopyIn(filepath.Join(t.dir, strconv.Itoa(nb), "u"), t.stack(n)); err != nil {
		c.freeTmpLayer(nb)
		return fmt.Errorf("local: merge the layers of /tmp: %w", err)
	}
	// The live mount is rebuilt on the new base (its upper kept).
	oldBase, merged, old := t.base, append([]int{}, t.layers[:n]...), t.upper
	t.base, t.layers = filepath.Join(strconv.Itoa(nb), "u"), t.layers[n:]
	if err := c.remount("checkpoint", false, 0, true, len(t.layers), []string{tmpTarget}); err != nil {
		t.base, t.layers, t.upper = oldBase, append(merged, t.layers...), old
		c.freeTmpLayer(nb)
		return err
	}
	// The upper of the mount just replaced was empty (a checkpoint was
	// just taken).
	c.freeTmpLayer(old)
	for _, l := range merged {
		c.freeTmpLayer(l)
	}
	c.freeTmpBase(oldBase)
	c.drop(func(e *ckptEntry) bool {
		k, ok := t.n[e.ID]
		if !ok {
			return true // its /tmp is empty (e): it covers the workspace only
		}
		t.n[e.ID] = k - n
		return k >= n
	})
	return nil
}

// forkSeed is where Export leaves a fork's /tmp for the sandbox that
// opens the fork's workspace folder ws (an absolute, resolved path): in
// sage's home, since that sandbox may be another process's, with a
// runtime directory of its own (sage session fork, then sage exec).
func forkSeed(ws string) string {
	h := sha256.Sum256([]byte(ws))
	return filepath.Join(sandbox.Home(), "fork-tmp", hex.EncodeToString(h[:8]))
}

// seedNote is what a fork seed records: the folder it belongs to and the
// folder's fingerprint when Export was done with it.
type seedNote struct {
	Workspace string `json:"workspace"`
	Folder    string `json:"folder"`
}

// exportTmp copies /tmp's state of checkpoint e into dir's fork seed
// (nothing when that /tmp is empty), dropping a seed left earlier.
func (c *checkpoints) exportTmp(e ckptEntry, dir string) error {
	ws, err := filepath.EvalSymlinks(dir)
	if err == nil {
		ws, err = filepath.Abs(ws)
	}
	if err != nil {
		return fmt.Errorf("local: fork: %w", err)
	}
	sweepSeeds()
	seed := forkSeed(ws)
	removeLayer(seed)
	t := &c.tmp
	if !t.on() || !c.covers(e) {
		return nil
	}
	n := c.tmpOf(e)
	var src string
	var view *os.File
	if n == 0 && t.base == "e" {
		return nil // an empty /tmp
	}
	if n == 0 {
		src = t.host(t.base)
	} else {
		if view, err = c.agent.View(t.stack(n)); err != nil {
			return fmt.Errorf("local: fork: the checkpoint's /tmp: %w", err)
		}
		defer view.Close()
		src = "/proc/self/fd/" + strconv.Itoa(int(view.Fd()))
	}
	if empty(src) {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(seed, "tmp"), 0o700); err != nil {
		return fmt.Errorf("local: fork: %w", err)
	}
	fail := func(err error) error {
		removeLayer(seed)
		return fmt.Errorf("local: fork: the checkpoint's /tmp: %w", err)
	}
	if err := layers.Copy(filepath.Join(seed, "tmp"), src, nil); err != nil {
		return fail(err)
	}
	if err := os.Chmod(filepath.Join(seed, "tmp"), 0o700); err != nil {
		return fail(err)
	}
	print, err := folderPrint(ws)
	if err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(seedNote{Workspace: ws, Folder: print})
	if err := os.WriteFile(filepath.Join(seed, "seed.json"), b, 0o600); err != nil {
		return fail(err)
	}
	return nil
}

// takeSeed moves the fork seed of the workspace folder into the runtime
// directory (tmp-seed), where the first session sandbox's /tmp starts
// from it; a seed whose folder changed since Export is dropped.
func (c *checkpoints) takeSeed() {
	seed := forkSeed(c.s.hostWS)
	b, err := os.ReadFile(filepath.Join(seed, "seed.json"))
	if err != nil {
		return
	}
	defer removeLayer(seed)
	var note seedNote
	if json.Unmarshal(b, &note) != nil || note.Workspace != c.s.hostWS {
		return
	}
	if print, err := folderPrint(c.s.hostWS); err != nil || print != note.Folder {
		return
	}
	dst := filepath.Join(c.dir, "tmp-seed")
	removeLayer(dst)
	if err := os.Rename(filepath.Join(seed, "tmp"), dst); err != nil {
		// Another file system: a copy.
		if err := os.Mkdir(dst, 0o700); err == nil {
			if err := layers.Copy(dst, filepath.Join(seed, "tmp"), nil); err != nil {
				removeLayer(dst)
			}
		}
	}
}

// sweepSeeds drops the fork seeds whose workspace folder is gone (a fork
// never opened with checkpoints, then removed).
func sweepSeeds() {
	root := filepath.Join(sandbox.Home(), "fork-tmp")
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		p := filepath.Join(root, e.Name())
		b, err := os.ReadFile(filepath.Join(p, "seed.json"))
		var note seedNote
		if err == nil && json.Unmarshal(b, &note) == nil {
			if _, err := os.Stat(note.Workspace); err == nil {
				continue
			}
		} else if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) < time.Hour {
			continue // an Export in progress
		}
		removeLayer(p)
	}
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
