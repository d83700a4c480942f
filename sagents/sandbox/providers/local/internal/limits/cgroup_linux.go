//go:build linux

package limits

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// cgroupRoot is where cgroup hierarchies are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// Cgroups is the per-sandbox cgroups that enforce the pids and memory
// limits when rlimits cannot (the host's root ignores RLIMIT_NPROC). A nil
// set means rlimits only.
type Cgroups struct {
	mu        sync.Mutex
	dirs      []string
	procs     []string // cgroup.procs files a command joins
	pids, mem bool
	pidsMax   int // the pids limit, 0 without a pids cgroup
	removed   bool
	thread    *cgroupThread // a host thread in the cgroups, forking bwrap (v1)
	// cpuParent holds one CPU-accounting cgroup per command (CommandCgroup),
	// for the CPU time budget: the cpuacct hierarchy's in v1, the
	// sandbox's own cgroup in v2. Empty when there is no CPU limit.
	cpuParent string
	cpuV2     bool
	commands  int              // names the next command cgroup
	failed    map[string]error // why a v1 hierarchy could not be used
}

// fail notes why the v1 hierarchy ctl could not be used; it returns err.
func (c *Cgroups) fail(ctl string, err error) error {
	if err != nil {
		if c.failed == nil {
			c.failed = map[string]error{}
		}
		c.failed[ctl] = err
	}
	return err
}

// Memory reports whether a cgroup bounds memory. It stays true after
// remove, so a command racing with Close is refused by join rather than
// started without RLIMIT_AS.
func (c *Cgroups) Memory() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mem
}

// NewCgroups creates the cgroups the limits need, where the cgroup tree
// is writable. A limit that would not hold for the whole command is an
// error: the pids limit as root (the kernel ignores RLIMIT_NPROC for the
// host's root), a CPU time limit, and a memory limit the config asked for
// (the default one falls back to RLIMIT_AS, reported as per process).
func NewCgroups(id string, l Limits) (*Cgroups, error) {
	if l.Pids <= 0 && l.MemoryBytes <= 0 && l.CPUTime <= 0 {
		return nil, nil
	}
	sweepDeadCgroups()
	c, cgErr := createCgroups("sage-"+id+"-"+ownerTag()+"-"+randomSuffix(), l)
	why := func(what, ctl string) string { // one line: the error of that hierarchy
		err := cgErr
		if e, ok := c.failed[ctl]; ok {
			err = e
		}
		if err != nil {
			return what + " (" + strings.ReplaceAll(err.Error(), "\n", "; ") + ")"
		}
		return what
	}
	var err error
	switch {
	case l.Pids > 0 && !c.pids && os.Geteuid() == 0:
		err = fmt.Errorf("%w: the pids limit (%d) cannot be enforced: running as root, where the kernel ignores RLIMIT_NPROC, and %s; fix: run as an unprivileged user, give sage a writable cgroup, or set pids_limit: -1 to run without one",
			driver.ErrIsolationUnavailable, l.Pids, why("no writable cgroup pids controller", "pids"))
	case l.CPUTime > 0 && c.cpuParent == "":
		err = fmt.Errorf("%w: the CPU time limit (%s) cannot be enforced for the whole command: %s, and RLIMIT_CPU alone counts each process apart; fix: set cpu_time_limit: 0 (--cpu-time 0) to run without one, or run sage with a writable cgroup (as root, or delegated: systemd-run --user --scope -p Delegate=yes sage ...)",
			driver.ErrIsolationUnavailable, l.CPUTime, why("no writable cgroup for CPU accounting", "cpuacct"))
	case l.memoryAsked && !c.mem:
		err = fmt.Errorf("%w: the memory limit (%d MB) cannot be enforced for the whole command: %s, and RLIMIT_AS alone counts each process apart and misses shared memory; fix: set memory_limit_mb: -1 (--memory -1) to run without one, or run sage with a writable cgroup (as root, or delegated: systemd-run --user --scope -p Delegate=yes sage ...)",
			driver.ErrIsolationUnavailable, l.MemoryBytes>>20, why("no writable cgroup memory controller", "memory"))
	}
	if err != nil {
		c.Remove()
		return nil, err
	}
	if !c.pids && !c.mem && c.cpuParent == "" {
		c.Remove()
		return nil, nil
	}
	return c, nil
}

// ownerTag names this process in its cgroups' names: o<pid>_<start
// time>_<pid namespace>, so a later sage tells the cgroups a killed one
// left (kill -9 runs no cleanup; they stay, empty) from a live one's.
var ownerTag = sync.OnceValue(func() string {
	start, _ := procStart(os.Getpid())
	return fmt.Sprintf("o%d_%s_%d", os.Getpid(), start, pidNS())
})

// procStart is field 22 of /proc/PID/stat: when the process started, in
// clock ticks since boot (a reused pid has another).
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	i := strings.LastIndexByte(string(b), ')') // the name may hold spaces
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

func pidNS() uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}

// sweepDeadCgroups removes, once per process, the empty cgroups that
// dead sage processes of this pid namespace left beside this process's
// own, in every hierarchy: rmdir only, which the kernel refuses for a
// cgroup something still runs in. Names without an owner tag (older
// versions) are left alone.
var sweepDeadCgroups = sync.OnceFunc(sweepDead)

func sweepDead() {
	own, err := ownCgroups()
	if err != nil {
		return
	}
	var parents []string
	if p, ok := own[""]; ok && fileExists(filepath.Join(cgroupRoot, "cgroup.controllers")) {
		parents = append(parents, filepath.Join(cgroupRoot, p))
	} else {
		for _, ctl := range []string{"pids", "memory", "cpuacct"} {
			if p, ok := own[ctl]; ok {
				parents = append(parents, filepath.Join(cgroupRoot, ctl, p))
			}
		}
	}
	ns := strconv.FormatUint(pidNS(), 10)
	for _, parent := range parents {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "sage-") && deadOwner(e.Name(), ns) {
				removeEmpty(filepath.Join(parent, e.Name()))
			}
		}
	}
}

// deadOwner reports whether a cgroup name's owner tag names a process of
// pid namespace ns that is gone (no such pid, or one started later).
func deadOwner(name, ns string) bool {
	parts := strings.Split(name, "-")
	if len(parts) < 4 {
		return false
	}
	tag := strings.Split(strings.TrimPrefix(parts[len(parts)-2], "o"), "_")
	if len(tag) != 3 || tag[2] != ns || !strings.HasPrefix(parts[len(parts)-2], "o") {
		return false
	}
	pid, err := strconv.Atoi(tag[0])
	if err != nil || pid <= 0 {
		return false
	}
	start, ok := procStart(pid)
	return !ok || start != tag[1]
}

// removeEmpty removes an empty cgroup and its empty children (a command's
// CPU-accounting cgroup).
func removeEmpty(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			_ = syscall.Rmdir(filepath.Join(dir, e.Name()))
		}
	}
	_ = syscall.Rmdir(dir)
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ProbeCgroups creates the cgroups limits l would use, under a name of
// their own ("sage-probe-..."), to see what this machine allows; the
// caller removes them.
func ProbeCgroups(l Limits) (*Cgroups, error) {
	return createCgroups("sage-probe-"+randomSuffix(), l)
}

// V2 reports whether the unified (v2) cgroup hierarchy is mounted at the
// cgroup root.
func V2() bool { return fileExists(filepath.Join(cgroupRoot, "cgroup.controllers")) }

// PidsAndMemory reports whether the set has both a pids and a memory
// cgroup.
func (c *Cgroups) PidsAndMemory() bool { return c != nil && c.pids && c.mem }

// Procs are the cgroup.procs files a command of the sandbox joins.
func (c *Cgroups) Procs() []string { return append([]string{}, c.procs...) }

// Dirs are the directories of the set's cgroups, which Remove removes.
func (c *Cgroups) Dirs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string{}, c.dirs...)
}

// createCgroups makes the cgroups under this process's own, in cgroup v2
// if the unified hierarchy is mounted at cgroupRoot, else in the v1 pids
// and memory hierarchies. What fails is left out and reported.
func createCgroups(name string, l Limits) (*Cgroups, error) {
	c := &Cgroups{}
	own, err := ownCgroups()
	if err != nil {
		return c, err
	}
	if p, ok := own[""]; ok && fileExists(filepath.Join(cgroupRoot, "cgroup.controllers")) {
		return c, c.createV2(filepath.Join(cgroupRoot, p), name, l)
	}
	var errs []error
	if l.CPUTime > 0 {
		if p, ok := own["cpuacct"]; ok {
			dir := filepath.Join(cgroupRoot, "cpuacct", p, name)
			var ok bool
			if err := c.addDir(dir, nil, &ok); err != nil {
				errs = append(errs, c.fail("cpuacct", err))
			} else {
				c.cpuParent = dir
			}
		}
	}
	if l.Pids > 0 {
		if p, ok := own["pids"]; ok {
			dir := filepath.Join(cgroupRoot, "pids", p, name)
			errs = append(errs, c.fail("pids", c.add(dir, map[string]string{"pids.max": strconv.Itoa(l.Pids)}, &c.pids)))
			if c.pids {
				c.pidsMax = l.Pids
			}
		}
	}
	if l.MemoryBytes > 0 {
		if p, ok := own["memory"]; ok {
			dir := filepath.Join(cgroupRoot, "memory", p, name)
			errs = append(errs, c.fail("memory", c.add(dir, map[string]string{"memory.limit_in_bytes": strconv.FormatInt(l.MemoryBytes, 10)}, &c.mem)))
			if c.mem { // no swapping around the limit, where swap is accounted
				os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(l.MemoryBytes, 10)), 0)
			}
		}
	}
	return c, errors.Join(errs...)
}

func (c *Cgroups) createV2(parent, name string, l Limits) error {
	want := map[string]string{}
	var ctrls []string
	if l.Pids > 0 {
		want["pids.max"], ctrls = strconv.Itoa(l.Pids), append(ctrls, "+pids")
	}
	if l.MemoryBytes > 0 {
		want["memory.max"], ctrls = strconv.FormatInt(l.MemoryBytes, 10), append(ctrls, "+memory")
	}
	sub := filepath.Join(parent, "cgroup.subtree_control")
	for _, ctl := range ctrls {
		os.WriteFile(sub, []byte(ctl), 0) // may already be on; checked below
	}
	var ok bool
	if err := c.add(filepath.Join(parent, name), want, &ok); err != nil {
		return err
	}
	c.pids, c.mem = l.Pids > 0, l.MemoryBytes > 0
	if l.CPUTime > 0 { // cpu.stat counts usage without the cpu controller
		c.cpuParent, c.cpuV2 = filepath.Join(parent, name), true
	}
	if c.mem {
		os.WriteFile(filepath.Join(parent, name, "memory.swap.max"), []byte("0"), 0)
	}
	return nil
}

// add creates dir and writes its limit files; on success it sets *ok.
// Commands join it.
func (c *Cgroups) add(dir string, files map[string]string, ok *bool) error {
	if err := c.addDir(dir, files, ok); err != nil {
		return err
	}
	c.procs = append(c.procs, filepath.Join(dir, "cgroup.procs"))
	return nil
}

// addDir is add for a cgroup commands do not join themselves (the parent
// of the command cgroups).
func (c *Cgroups) addDir(dir string, files map[string]string, ok *bool) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil {
			syscall.Rmdir(dir)
			return fmt.Errorf("cgroup %s: %w", f, err)
		}
	}
	c.dirs = append(c.dirs, dir)
	*ok = true
	return nil
}

// ownCgroups reads /proc/self/cgroup: controller -> path ("" for v2).
func ownCgroups() (map[string]string, error) { return readCgroups("/proc/self/cgroup") }

// readCgroups reads a /proc/.../cgroup file: controller -> path ("" for
// v2).
func readCgroups(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out, sc.Err()
}

// Join puts a process into the cgroups.
func (c *Cgroups) Join(pid int) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return fmt.Errorf("local: join cgroup: %w", driver.ErrClosed)
	}
	for _, procs := range c.procs {
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("local: join cgroup: %w", err)
		}
	}
	return nil
}

// Trampoline returns the command that joins the cgroups (and the
// command's own, extra) and then execs the program: a one-line /bin/sh
// script, so every process is born inside them (isolation none, where no
// gate holds the command).
func (c *Cgroups) Trampoline(prog string, args []string, extra ...string) (string, []string, error) {
	if c == nil {
		return prog, append([]string{prog}, args...), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return "", nil, fmt.Errorf("local: %w", driver.ErrClosed)
	}
	procs := append(append([]string{}, c.procs...), extra...)
	if len(procs) == 0 {
		return prog, append([]string{prog}, args...), nil
	}
	var script strings.Builder
	for i := range procs {
		fmt.Fprintf(&script, `echo $$ > "$%d" || { echo "sage: cannot join cgroup $%d" >&2; exit 125; }; `, i+1, i+1)
	}
	fmt.Fprintf(&script, "shift %d; exec \"$@\"", len(procs))
	argv := append([]string{"sh", "-c", script.String(), "sage-cgroup"}, procs...)
	argv = append(argv, prog)
	return "/bin/sh", append(argv, args...), nil
}

// Remove kills what is left in the cgroups and removes them.
func (c *Cgroups) Remove() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if err := c.stopThread(); err != nil {
		// This process's thread may still be in them: leave them to the
		// system rather than kill what their cgroup.procs lists.
		c.dirs, c.procs, c.removed = nil, nil, true
		return err
	}
	for _, dir := range c.dirs {
		if dir == c.cpuParent { // command cgroups still there (a background task ending)
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.IsDir() {
					errs = append(errs, removeCgroup(filepath.Join(dir, e.Name())))
				}
			}
		}
		errs = append(errs, removeCgroup(dir))
	}
	c.dirs, c.procs, c.removed = nil, nil, true
	return errors.Join(errs...)
}

// removeCgroup removes a cgroup, killing what is left in it. A command's
// last process may still be exiting when the command is done (bwrap
// returns before its sandbox's init is reaped), so it retries, quickly at
// first, for about a second.
func removeCgroup(dir string) error {
	var err error
	delay := time.Millisecond
	for range 60 {
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if b, rerr := os.ReadFile(filepath.Join(dir, "cgroup.procs")); rerr == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, _ := strconv.Atoi(f); pid > 0 && pid != os.Getpid() { // never this process (a thread of it)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
	return fmt.Errorf("local: remove cgroup %s: %w", dir, err)
}

// fileExists reports whether p exists.
func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
