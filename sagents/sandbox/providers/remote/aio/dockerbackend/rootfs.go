package dockerbackend

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/sage-go/sage/internal/termsafe"
)

// DefaultPackages are what the full sandbox image installs on top of a
// minimal Debian: Python with venv and pip, git, curl (with the CA
// certificates), bash and coreutils.
var DefaultPackages = []string{"bash", "ca-certificates", "coreutils", "curl", "git", "python3", "python3-pip", "python3-venv"}

// rootfsTimeout bounds one debootstrap run.
const rootfsTimeout = 45 * time.Minute

// rootfsFormat changes when the way the tree is made changes, so caches
// made the old way are not reused.
const rootfsFormat = "sage-rootfs-1"

// RootfsOptions say which Debian root file system to make.
type RootfsOptions struct {
	// Suite is the Debian release (default: VERSION_CODENAME of
	// /etc/os-release, else bookworm).
	Suite string
	// Mirror is the Debian archive (default: the first Debian URI of the
	// machine's apt sources, else http://deb.debian.org/debian).
	Mirror string
	// Packages are installed on top of debootstrap's minbase (default
	// DefaultPackages).
	Packages []string
	// CacheDir holds the tarballs (default ~/.cache/sage/image, under
	// $XDG_CACHE_HOME when set).
	CacheDir string
	// Debootstrap is the program (default debootstrap on PATH).
	Debootstrap string
}

func (o *RootfsOptions) defaults() error {
	if o.Suite == "" {
		o.Suite = hostSuite("/etc/os-release")
	}
	if o.Mirror == "" {
		o.Mirror = aptMirror("/etc/apt")
	}
	if len(o.Packages) == 0 {
		o.Packages = DefaultPackages
	}
	for _, p := range o.Packages {
		if !validPackage(p) {
			return fmt.Errorf("image: package %q: want a Debian package name such as python3-venv", p)
		}
	}
	if !validPackage(o.Suite) {
		return fmt.Errorf("image: suite %q: want a Debian suite such as bookworm", o.Suite)
	}
	if !strings.HasPrefix(o.Mirror, "http://") && !strings.HasPrefix(o.Mirror, "https://") && !strings.HasPrefix(o.Mirror, "file:/") {
		return fmt.Errorf("image: mirror %q: want an http(s):// or file:/ URL of a Debian archive", o.Mirror)
	}
	if o.CacheDir == "" {
		dir, err := sageCacheDir()
		if err != nil {
			return err
		}
		o.CacheDir = filepath.Join(dir, "image")
	}
	if o.Debootstrap == "" {
		o.Debootstrap = "debootstrap"
	}
	return nil
}

// sageCacheDir is sage's per-user cache, ~/.cache/sage (or
// $XDG_CACHE_HOME/sage).
func sageCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("image: cache directory: %w", err)
	}
	return filepath.Join(dir, "sage"), nil
}

// cacheKey is the content hash of the root file system's inputs: the suite,
// the mirror, the sorted package list and the architecture.
func (o RootfsOptions) cacheKey() string {
	pkgs := slices.Clone(o.Packages)
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s\n", rootfsFormat, o.Suite, o.Mirror, runtime.GOARCH, strings.Join(pkgs, ","))
	return hex.EncodeToString(h.Sum(nil))
}

// tarballPath is where the root file system of o is cached.
func (o RootfsOptions) tarballPath() string {
	return filepath.Join(o.CacheDir, "rootfs-"+o.cacheKey()[:16]+".tar")
}

// debootstrapRootfs returns the tarball of a Debian root file system made by
// debootstrap (variant minbase, plus o.Packages) from o.Mirror, making
// it the first time (minutes; root only) and reusing it afterwards. One
// process makes it at a time (a file lock beside it); a failed or
// interrupted run leaves nothing behind. progress (nil: none) gets a
// line per step with its duration, and for debootstrap, which takes
// minutes, a line every progressEvery with what it is doing.
func debootstrapRootfs(ctx context.Context, o RootfsOptions, progress io.Writer) (string, error) {
	if err := o.defaults(); err != nil {
		return "", err
	}
	if progress == nil {
		progress = io.Discard
	}
	step := stepper(progress)
	out := o.tarballPath()
	if fileExists(out) {
		return out, nil
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	lock := flock.New(out + ".lock")
	ok, err := lock.TryLockContext(ctx, 200*time.Millisecond)
	if err != nil || !ok {
		return "", fmt.Errorf("image: lock %s: %w", out+".lock", errors.Join(err, ctx.Err()))
	}
	defer lock.Unlock()
	if fileExists(out) { // made while we waited
		return out, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("image: debootstrap needs root (fix: run `make image` as root, or where a registry is reachable use --from dockerfile)")
	}
	if _, err := exec.LookPath(o.Debootstrap); err != nil {
		return "", fmt.Errorf("image: %s not found (fix: apt-get install debootstrap, or run `make setup`): %w", o.Debootstrap, err)
	}
	tmp, err := os.MkdirTemp(o.CacheDir, "rootfs-tmp-")
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "root")
	logFile := filepath.Join(tmp, "debootstrap.log")
	long := startLongStep(progress, fmt.Sprintf("debootstrap %s (minbase + %s) from %s (minutes, once per machine)", o.Suite, strings.Join(o.Packages, " "), o.Mirror))
	stopWatch := watchLog(logFile, progressEvery, long.note)
	err = run(ctx, logFile, o.Debootstrap, "--variant=minbase",
		"--include="+strings.Join(o.Packages, ","), o.Suite, tree, o.Mirror)
	stopWatch()
	long.done()
	if err != nil {
		return "", err
	}
	done := step("pack the root file system into " + out)
	defer done()
	for _, junk := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		if err := clearDir(filepath.Join(tree, junk)); err != nil {
			return "", err
		}
	}
	part := filepath.Join(tmp, "rootfs.tar")
	if err := run(ctx, filepath.Join(tmp, "tar.log"), "tar", "--numeric-owner", "--xattrs", "-C", tree, "-cf", part, "."); err != nil {
		return "", err
	}
	if err := os.Rename(part, out); err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	return out, nil
}

// run runs a command in its own process group, killed with the group
// when ctx ends, its output in logFile; an error carries the log's tail.
func run(ctx context.Context, logFile, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, rootfsTimeout)
	defer cancel()
	log, err := os.Create(logFile)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("image: %s failed: %w\n%s", name, err, tail(logFile, 20))
	}
	return nil
}

// tail returns the last n lines of a file (at most 64 KiB read).
func tail(file string, n int) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 64<<10 {
		_, _ = f.Seek(-64<<10, io.SeekEnd)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("image: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && e.Name() == "partial" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("image: %w", err)
		}
	}
	return nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// validPackage accepts Debian package and suite names.
func validPackage(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for i, r := range s {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || (i > 0 && strings.ContainsRune("+-._", r))
		if !ok {
			return false
		}
	}
	return true
}

// progressEvery is how often a long step (debootstrap) says what it is
// doing.
var progressEvery = 20 * time.Second

// longStep is a step line that may take minutes: its notes go on lines
// of their own below it, and its end says the duration.
type longStep struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	start time.Time
	notes bool
}

func startLongStep(w io.Writer, label string) *longStep {
	fmt.Fprintf(w, "image: %s ... ", label)
	return &longStep{w: w, label: label, start: time.Now()}
}

// note prints what the step is doing, with the time it has taken.
func (s *longStep) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.notes {
		fmt.Fprintln(s.w)
		s.notes = true
	}
	fmt.Fprintf(s.w, "image:     %s: %s\n", time.Since(s.start).Round(time.Second), what)
}

func (s *longStep) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Since(s.start).Round(100 * time.Millisecond)
	if s.notes {
		fmt.Fprintf(s.w, "image: %s: done in %s\n", s.label, d)
		return
	}
	fmt.Fprintf(s.w, "%s\n", d)
}

// watchLog calls note with the last line of logFile every interval
// (when it changed); stop ends it.
func watchLog(logFile string, every time.Duration, note func(string)) (stop func()) {
	end := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-end:
				return
			case <-t.C:
			}
			if line := strings.TrimSpace(tail(logFile, 1)); line != "" && line != last {
				last = line
				note(termsafe.Text(line))
			}
		}
	}()
	return func() { close(end); <-done }
}
