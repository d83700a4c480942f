package dockerbackend

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
)

func TestAptMirror(t *testing.T) {
	dir := t.TempDir()
	assert.Equal(t, defaultMirror, aptMirror(dir), "no sources")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755))
	// deb822, security first: skipped; the release's URI wins.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sources.list.d", "debian.sources"), []byte(`Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

# a comment
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

Types: deb
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`), 0o644))
	assert.Equal(t, "http://mirror.example/debian", aptMirror(dir))
	// A one-line sources.list comes first.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sources.list"), []byte(`# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://deb.example/debian bookworm-updates main
deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main contrib
`), 0o644))
	assert.Equal(t, "http://one.example/debian", aptMirror(dir))
	// A disabled stanza is passed over.
	assert.Equal(t, "", mirrorDeb822("Enabled: no\nTypes: deb\nURIs: http://x.example/debian\nSuites: bookworm\n"))
}

func FuzzAptSources(f *testing.F) {
	f.Add("deb [x] http://a/debian bookworm main\n")
	f.Add("Types: deb\nURIs: http://a/debian\nSuites: bookworm\n")
	f.Add("deb [unterminated http://a bookworm")
	f.Fuzz(func(t *testing.T, s string) {
		for _, u := range []string{mirrorOneLine(s), mirrorDeb822(s)} {
			if u != "" && !usableURI(u) {
				t.Fatalf("unusable mirror %q from %q", u, s)
			}
		}
	})
}

func TestHostSuite(t *testing.T) {
	f := filepath.Join(t.TempDir(), "os-release")
	require.NoError(t, os.WriteFile(f, []byte("NAME=\"Debian\"\nVERSION_CODENAME=trixie\n"), 0o644))
	assert.Equal(t, "trixie", hostSuite(f))
	require.NoError(t, os.WriteFile(f, []byte("VERSION_CODENAME=\"bad name; rm\"\n"), 0o644))
	assert.Equal(t, "bookworm", hostSuite(f))
	assert.Equal(t, "bookworm", hostSuite(filepath.Join(t.TempDir(), "none")))
}

// The cache key is the inputs' hash: package order and duplicates do not
// matter; suite, mirror and the package set do.
func TestRootfsKey(t *testing.T) {
	base := RootfsOptions{Suite: "bookworm", Mirror: "http://m/debian", Packages: []string{"git", "python3"}}
	same := RootfsOptions{Suite: "bookworm", Mirror: "http://m/debian", Packages: []string{"python3", "git", "git"}}
	assert.Equal(t, base.cacheKey(), same.cacheKey())
	for _, other := range []RootfsOptions{
		{Suite: "trixie", Mirror: base.Mirror, Packages: base.Packages},
		{Suite: base.Suite, Mirror: "http://other/debian", Packages: base.Packages},
		{Suite: base.Suite, Mirror: base.Mirror, Packages: []string{"git"}},
	} {
		assert.NotEqual(t, base.cacheKey(), other.cacheKey(), "%+v", other)
	}
	base.CacheDir = "/c"
	assert.Equal(t, "/c/rootfs-"+base.cacheKey()[:16]+".tar", base.tarballPath())
}

func TestRootfsBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []RootfsOptions{
		{Packages: []string{"python3; rm -rf /"}},
		{Packages: []string{"-o=evil"}},
		{Suite: "../x"},
		{Mirror: "ftp://x/debian"},
	} {
		o.CacheDir = dir
		_, err := debootstrapRootfs(context.Background(), o, nil)
		require.Error(t, err, "%+v", o)
	}
	ents, _ := os.ReadDir(dir)
	assert.Empty(t, ents, "nothing left behind")
}

// A cached tarball is returned as is: no debootstrap runs (the program
// named does not exist).
func TestRootfsCached(t *testing.T) {
	o := RootfsOptions{Suite: "bookworm", Mirror: "http://m/debian", CacheDir: t.TempDir(), Debootstrap: "/nonexistent/debootstrap"}
	require.NoError(t, o.defaults())
	require.NoError(t, os.WriteFile(o.tarballPath(), []byte("tar"), 0o644))
	got, err := debootstrapRootfs(context.Background(), o, nil)
	require.NoError(t, err)
	assert.Equal(t, o.tarballPath(), got)
}

// A debootstrap that fails leaves no tarball and no temporary tree, and
// its error carries the program's output.
func TestRootfsFailureLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (debootstrapRootfs runs debootstrap only as root)", "run the tests as root")
	}
	fake := filepath.Join(t.TempDir(), "debootstrap")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nmkdir -p \"$4/etc\"; echo 'E: Failed getting release file' >&2; exit 1\n"), 0o755))
	o := RootfsOptions{Suite: "bookworm", Mirror: "http://m/debian", CacheDir: t.TempDir(), Debootstrap: fake}
	require.NoError(t, o.defaults())
	_, err := debootstrapRootfs(context.Background(), o, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Failed getting release file")
	ents, _ := os.ReadDir(o.CacheDir)
	for _, e := range ents {
		assert.Equal(t, filepath.Base(o.tarballPath())+".lock", e.Name(), "left behind")
	}
}

// A step of minutes (debootstrap) says what it is doing every interval,
// from its log's last line, and its duration at the end; a quick one
// stays on one line.
func TestLongStepShowsProgress(t *testing.T) {
	var w testenv.Buffer
	logFile := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(logFile, []byte("I: Retrieving InRelease\n"), 0o644))
	s := startLongStep(&w, "debootstrap x")
	stop := watchLog(logFile, 50*time.Millisecond, s.note)
	require.Eventually(t, func() bool { return strings.Contains(w.String(), "I: Retrieving InRelease") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(logFile, []byte("I: Retrieving InRelease\nI: Extracting \x1b[31mlibc6\n"), 0o644))
	require.Eventually(t, func() bool { return strings.Contains(w.String(), "I: Extracting") }, 10*time.Second, 10*time.Millisecond)
	stop()
	s.done()
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	assert.Equal(t, "image: debootstrap x ... ", lines[0])
	assert.Regexp(t, `^image:     \d+s: I: Retrieving InRelease$`, lines[1])
	assert.NotContains(t, w.String(), "\x1b", "the log's control characters are escaped")
	assert.Regexp(t, `^image: debootstrap x: done in [0-9.]+m?s$`, lines[len(lines)-1])
	assert.Equal(t, 1, strings.Count(w.String(), "Retrieving"), "a line said once")

	var quick testenv.Buffer
	q := startLongStep(&quick, "quick")
	q.done()
	assert.Regexp(t, `^image: quick \.\.\. [0-9.]+m?s\n$`, quick.String(), "control: a quick step is one line")
}
