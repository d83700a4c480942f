//go:build linux

package local

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// leftovers are what a process holding sandboxes over SAGE_HOME leaves in
// SAGE_HOME/runtime when it is killed with -9: an anonymous sandbox's
// runtime directory, a fork's (the core's Sandbox.Fork opens it
// anonymous), the layers its parent's Close set aside for it, and a named
// sandbox's runtime directory.
type leftovers struct {
	anon, fork, named string
	aside             []string
	sandboxes         []*Sandbox // the anonymous one and the fork, in the process that opened them
	// idmap is, as root where idmapped mounts work, an anonymous
	// sandbox's runtime directory whose workspace, project, is a
	// root-owned project shown through an idmapped mount in it: the kill
	// leaves that mount attached.
	idmap, project string
}

// idmapLeftovers says whether the helper opens the idmapped one.
func idmapLeftovers() bool {
	return os.Geteuid() == 0 && os.Getenv("SAGE_TEST_UNPRIVILEGED") == "" && uids.IdmapAvailable(os.TempDir()) == nil
}

// openLeftovers opens them, the workspaces in new folders under scratch
// (ws1, ws2, fork, ws3):
// an anonymous sandbox with a started session and a checkpoint, a fork of
// another anonymous one closed under it (its layers set aside), and, with
// a name, a named sandbox with a checkpoint.
func openLeftovers(t *testing.T, scratch, name string) leftovers {
	t.Helper()
	ctx := context.Background()
	fresh := false
	n := 0
	cfgIn := func() driver.Config {
		n++
		return sandbox.Config{Mode: sandbox.Local, Workspace: filepath.Join(scratch, "ws"+string(rune('0'+n))),
			Local: sandbox.LocalConfig{Checkpoints: true, FreshPerCommand: &fresh, Isolation: sandbox.Isolation{Linux: sandbox.IsolationBwrap}}}
	}
	open := func(cfg driver.Config) *Sandbox {
		s, err := NewWithOptions(ctx, cfg, Options{Session: SessionOptions{Enabled: true}, ForkPool: -1})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	var out leftovers
	a := open(cfgIn())
	fkRun(t, a, "echo a > /workspace/a")
	_, err := a.Checkpoint(ctx)
	require.NoError(t, err)
	fkRun(t, a, "echo b > /workspace/b")
	out.anon = a.runtimeDir
	out.sandboxes = append(out.sandboxes, a)

	pcfg := cfgIn()
	p := open(pcfg)
	fkRun(t, p, "echo kept > /workspace/k")
	cp, err := p.Checkpoint(ctx)
	require.NoError(t, err)
	fcfg := pcfg
	fcfg.Workspace = filepath.Join(scratch, "fork")
	f, err := p.fork(ctx, cp.ID, fcfg, false)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(context.Background()) })
	assert.Equal(t, "kept\n", fkRun(t, f, "cat /workspace/k"))
	out.fork = f.runtimeDir
	out.sandboxes = append(out.sandboxes, f)
	before := asideFiles(t)
	require.NoError(t, p.Close(ctx))
	for _, p := range asideFiles(t) {
		if !slices.Contains(before, p) {
			out.aside = append(out.aside, p)
		}
	}
	require.NotEmpty(t, out.aside, "the parent's Close set its layers aside for the fork")

	if name != "" {
		ncfg := cfgIn()
		ncfg.SandboxID = name
		s := open(ncfg)
		fkRun(t, s, "echo named > /workspace/n")
		_, err := s.Checkpoint(ctx)
		require.NoError(t, err)
		out.named = s.runtimeDir
		if idmapLeftovers() {
			out.project = filepath.Join(scratch, "project")
			require.NoError(t, os.MkdirAll(filepath.Join(out.project, "src"), 0o755))
			require.NoError(t, os.Chmod(out.project, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(out.project, "src", "main.py"), []byte("print('hi')\n"), 0o644))
			icfg := cfgIn()
			icfg.Workspace = out.project
			s := open(icfg)
			require.True(t, s.ident.Idmapped())
			fkRun(t, s, "cat /workspace/src/main.py")
			out.idmap = s.runtimeDir
		}
	}
	return out
}

// asideFiles are the set-aside layers (and their locks) in SAGE_HOME/runtime.
func asideFiles(t *testing.T) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(sagehome.Dir(), "runtime", ".sage-forklayer-*"))
	require.NoError(t, err)
	return got
}

// runtimeNames are the names in SAGE_HOME/runtime, sorted.
func runtimeNames(t *testing.T) []string {
	t.Helper()
	got := entries(t, filepath.Join(sagehome.Dir(), "runtime"))
	slices.Sort(got)
	return got
}

// tree is every path under dir (what can be read of it).
func tree(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		out = append(out, p)
		return nil
	})
	return out
}

// TestForkLeftoversSweptAfterKill9: a process killed with -9 leaves its
// anonymous sandboxes' runtime directories (a fork's among them) and the
// layers set aside for its forks in SAGE_HOME/runtime. The next sandbox
// opened there removes them, and leaves those of a process still running
// (this one's) and a named sandbox's runtime directory, which outlives
// its process with its checkpoints.
func TestForkLeftoversSweptAfterKill9(t *testing.T) {
	if os.Getenv("SAGE_LEFTOVERS_HELPER") != "" {
		t.Skip("the helper runs in TestForkLeftoversHelper")
	}
	testenv.Command(t, "bwrap", testenv.SetupFix+" (apt-get install bubblewrap)")
	home, scratch := sandboxtest.TempDir(t), sandboxtest.TempDir(t)
	t.Setenv("SAGE_HOME", home)
	helper, dead := startLeftoversHelper(t, home, scratch)
	require.NotEmpty(t, dead.named)
	mine := openLeftovers(t, sandboxtest.TempDir(t), "")

	helper.Kill9()
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range []string{scratch, dead.anon, dead.fork, dead.named} {
		for len(testenv.Processes("bwrap", p)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	gone := append([]string{dead.anon, dead.fork}, dead.aside...)
	for _, p := range append(gone, dead.named, mine.anon, mine.fork) {
		_, err := os.Lstat(p)
		require.NoError(t, err, "before the sweep")
	}
	named := tree(dead.named)
	require.Greater(t, len(named), 3, "the named sandbox's runtime directory holds its layers")
	if dead.idmap != "" {
		b, err := os.ReadFile("/proc/self/mountinfo")
		require.NoError(t, err)
		require.Contains(t, string(b), " "+dead.idmap+"/", "the killed sandbox's idmapped mount is left attached")
		gone = append(gone, dead.idmap)
	}

	swept.Clear() // as a new process: the sweep is once per process
	ctx := context.Background()
	s, err := NewWithOptions(ctx, sandbox.Config{Mode: sandbox.Local, Workspace: sandboxtest.TempDir(t)}, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))

	for _, p := range append(gone, dead.anon+".lock", dead.fork+".lock") {
		_, err := os.Lstat(p)
		assert.ErrorIs(t, err, fs.ErrNotExist, "swept: its process is gone")
	}
	assert.Equal(t, named, tree(dead.named), "a named sandbox's runtime directory is never swept")
	if dead.idmap != "" {
		b, err := os.ReadFile(filepath.Join(dead.project, "src", "main.py"))
		assert.NoError(t, err, "the sweep detached the idmapped mount before the removal: the project is untouched")
		assert.Equal(t, "print('hi')\n", string(b))
		noMountUnder(t, dead.idmap)
	}
	want := []string{filepath.Base(dead.named), filepath.Base(mine.anon), filepath.Base(mine.anon) + ".lock",
		filepath.Base(mine.fork), filepath.Base(mine.fork) + ".lock"}
	for _, p := range mine.aside {
		want = append(want, filepath.Base(p))
	}
	slices.Sort(want)
	assert.Equal(t, want, runtimeNames(t), "this process's runtime directories and set-aside layers stay, with their locks")
	f := mine.sandboxes[1]
	f.dropSession() // the next command mounts the set-aside layers again
	assert.Equal(t, "kept\n", fkRun(t, f, "cat /workspace/k"), "the fork still stands on them")

	// The named sandbox opens again with its checkpoint.
	fresh := false
	n, err := NewWithOptions(ctx, sandbox.Config{Mode: sandbox.Local, SandboxID: filepath.Base(dead.named), Workspace: filepath.Join(scratch, "ws3"),
		Local: sandbox.LocalConfig{Checkpoints: true, FreshPerCommand: &fresh, Isolation: sandbox.Isolation{Linux: sandbox.IsolationBwrap}}},
		Options{Session: SessionOptions{Enabled: true}, ForkPool: -1})
	require.NoError(t, err)
	list, err := n.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1)
	assert.Equal(t, "named\n", fkRun(t, n, "cat /workspace/n"))
	require.NoError(t, n.Close(ctx))

	// This process's Closes remove the rest, locks included.
	for _, s := range mine.sandboxes {
		require.NoError(t, s.Close(ctx))
	}
	assert.Equal(t, []string{filepath.Base(dead.named)}, runtimeNames(t), "only the named sandbox's runtime directory is left")
}

// startLeftoversHelper runs TestForkLeftoversHelper in a new process over
// SAGE_HOME home, its workspaces under scratch, and waits until it opened
// its leftovers; the helper runs until its stdin closes.
func startLeftoversHelper(t *testing.T, home, scratch string) (*testenv.HelperProcess, leftovers) {
	t.Helper()
	h := testenv.StartHelper(t, "TestForkLeftoversHelper", "SAGE_LEFTOVERS_HELPER="+scratch, "SAGE_HOME="+home)
	var l leftovers
	if !h.ReadUntil(func(line string) bool {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "anon":
			l.anon = v
		case "fork":
			l.fork = v
		case "named":
			l.named = v
		case "idmap":
			l.idmap, l.project, _ = strings.Cut(v, " ")
		case "aside":
			l.aside = append(l.aside, v)
		}
		return k != "ready"
	}) {
		t.Fatal("the helper did not open its sandboxes")
	}
	return h, l
}

// TestForkLeftoversHelper is TestForkLeftoversSweptAfterKill9's daemon:
// it opens its leftovers, says where they are and waits to be killed.
func TestForkLeftoversHelper(t *testing.T) {
	scratch := os.Getenv("SAGE_LEFTOVERS_HELPER")
	if scratch == "" {
		t.Skip("run by TestForkLeftoversSweptAfterKill9")
	}
	l := openLeftovers(t, scratch, "named-kept")
	var b strings.Builder
	b.WriteString("anon " + l.anon + "\nfork " + l.fork + "\nnamed " + l.named + "\n")
	if l.idmap != "" {
		b.WriteString("idmap " + l.idmap + " " + l.project + "\n")
	}
	for _, p := range l.aside {
		b.WriteString("aside " + p + "\n")
	}
	b.WriteString("ready\n")
	os.Stdout.WriteString(b.String())
	io.Copy(io.Discard, os.Stdin)
}
