//go:build linux

package uids

import (
	"bufio"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/internal/sagehome"
	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/internal/hostkit"
)

// Identity is the host uid and gid a sandbox's processes run as when sage
// runs as root: never root itself. Each workspace has its own uid, so
// sessions cannot touch each other's files even through a bug, and what a
// sandbox leaves behind (a setuid copy of an interpreter, say) belongs to
// an unprivileged uid.
type Identity struct {
	UID, GID int
	// idmap, when set, is the owner on disk of a workspace sage shows
	// through an idmapped mount (idmap_linux.go) instead of chowning it:
	// uid stands for it inside.
	Idmap *IdmapOwner
}

// Owner is who owns what sage creates in the workspace from the host:
// the sandbox's uid, or, for an idmapped workspace, the folder's owner
// (whom the sandbox's uid stands for).
func (id *Identity) Owner() *hostkit.FileOwner {
	switch {
	case id == nil:
		return nil
	case id.Idmap != nil:
		return &hostkit.FileOwner{UID: int(id.Idmap.UID), GID: int(id.Idmap.GID)}
	}
	return &hostkit.FileOwner{UID: id.UID, GID: id.GID}
}

// Idmapped says the workspace is shown through an idmapped mount.
func (id *Identity) Idmapped() bool { return id != nil && id.Idmap != nil }

// Registry records which workspace holds which uid (one file per uid,
// holding the workspace's path). It is machine-wide, whatever SAGE_HOME a
// process uses, so two homes never hand out the same uid.
var Registry = "/var/lib/sage/uids"

// subuidFile is where named ranges come from.
var subuidFile = "/etc/subuid"

// Range resolves sandbox.local.uid_range: "FIRST:COUNT", a user name
// whose /etc/subuid range to use, or empty for the range of user "sage"
// when /etc/subuid has one, else driver.DefaultUIDRange.
func Range(spec string) (first, count uint32, err error) {
	switch {
	case strings.Contains(spec, ":"):
		return driver.ParseUIDRange(spec)
	case spec != "":
		f, c, ok, err := subuidRange(spec)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			return 0, 0, &driver.ConfigError{Field: "sandbox.local.uid_range", Value: spec,
				Reason: fmt.Sprintf("%s has no range for user %q; fix: usermod --add-subuids 2000000000-2000065535 %s, or give FIRST:COUNT", subuidFile, spec, spec)}
		}
		return f, c, nil
	}
	if f, c, ok, err := subuidRange("sage"); err == nil && ok {
		return f, c, nil
	}
	return driver.ParseUIDRange(driver.DefaultUIDRange)
}

// subuidRange reads the first range of name from /etc/subuid.
func subuidRange(name string) (first, count uint32, ok bool, err error) {
	f, err := os.Open(subuidFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("local: read %s: %w", subuidFile, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20)) // bounded: a line past 1 MiB is not read
	for sc.Scan() {
		user, rest, found := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !found || user != name {
			continue
		}
		first, count, err := driver.ParseUIDRange(rest)
		if err != nil {
			return 0, 0, false, fmt.Errorf("local: %s: user %s: %w", subuidFile, name, err)
		}
		return first, count, true, nil
	}
	return 0, 0, false, sc.Err()
}

// ForSession returns the uid the workspace ws runs under, and gives
// the workspace to it (adoptWorkspace), under the registry's lock: the
// one that already owns it when that is in the range and no other live
// workspace holds it, else a free one from the registry (a uid whose
// recorded workspace is gone, or no longer belongs to it, is free again).
func ForSession(spec, ws string) (*Identity, error) {
	first, count, err := Range(spec)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("local: workspace: %w", err)
	}
	owner := fi.Sys().(*syscall.Stat_t).Uid
	inRange := func(u uint32) bool { return u >= first && u-first < count }
	if err := os.MkdirAll(Registry, 0o700); err != nil {
		return nil, fmt.Errorf("local: uid registry: %w", err)
	}
	lock := flock.New(filepath.Join(Registry, ".lock"))
	if err := lock.Lock(); err != nil {
		return nil, fmt.Errorf("local: uid registry lock: %w", err)
	}
	defer lock.Unlock()
	if inRange(owner) {
		// Owned by a session uid already: that uid, unless the registry
		// gives it to another live workspace (a directory chowned to it,
		// or made by that session in a shared mount).
		if data, err := os.ReadFile(filepath.Join(Registry, strconv.FormatUint(uint64(owner), 10))); err == nil &&
			registered(data) != ws && !staleUID(string(data), owner) {
			return nil, fmt.Errorf("local: workspace %s belongs to uid %d, which is the session uid of %s; fix: use a new workspace, or chown -R it to another owner: %w",
				ws, owner, data, fs.ErrPermission)
		}
		if err := recordUID(owner, ws); err != nil {
			return nil, err
		}
		id := &Identity{UID: int(owner), GID: int(owner)}
		return id, adoptWorkspace(ws, id)
	}
	h := fnv.New32a()
	h.Write([]byte(ws))
	start := h.Sum32() % count
	for i := uint32(0); i < count; i++ {
		u := first + (start+i)%count
		data, err := os.ReadFile(filepath.Join(Registry, strconv.FormatUint(uint64(u), 10)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("local: uid registry: %w", err)
		case registered(data) != ws && !staleUID(string(data), u):
			continue
		}
		p := filepath.Join(Registry, strconv.FormatUint(uint64(u), 10))
		prev, _ := os.ReadFile(p)
		if err := recordUID(u, ws); err != nil {
			return nil, err
		}
		// Chowned under the lock: until then the entry would look stale
		// (its workspace not yet the uid's) to another process.
		id := &Identity{UID: int(u), GID: int(u)}
		err = adoptWorkspace(ws, id)
		if err == nil && id.Idmapped() {
			// Not chowned: the registry says so, or the entry would look
			// stale (the workspace not the uid's on disk).
			err = recordUID(u, ws+idmappedMark)
		}
		if err != nil {
			if prev != nil {
				os.WriteFile(p, prev, 0o600)
			} else {
				os.Remove(p)
			}
			return nil, err
		}
		return id, nil
	}
	return nil, &driver.ConfigError{Field: "sandbox.local.uid_range", Value: spec,
		Reason: fmt.Sprintf("all %d uids from %d are held by live workspaces; fix: give a wider range, or remove old workspaces", count, first)}
}

// idmappedMark ends the registry entry of a workspace shown through an
// idmapped mount: its owner on disk is not its uid.
const idmappedMark = "\nidmapped"

// registered is the workspace of a registry entry.
func registered(data []byte) string {
	return strings.TrimSuffix(string(data), idmappedMark)
}

// staleUID reports whether the workspace recorded for u (a registry
// entry) no longer holds it: gone, or, chowned, no longer the uid's.
func staleUID(entry string, u uint32) bool {
	ws, idmapped := strings.CutSuffix(entry, idmappedMark)
	fi, err := os.Lstat(ws)
	if err != nil {
		return true
	}
	if idmapped {
		return !fi.IsDir()
	}
	return fi.Sys().(*syscall.Stat_t).Uid != u
}

func recordUID(u uint32, ws string) error {
	p := filepath.Join(Registry, strconv.FormatUint(uint64(u), 10))
	if data, err := os.ReadFile(p); err == nil && string(data) == ws {
		return nil
	}
	tmp := p + ".tmp-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.WriteFile(tmp, []byte(ws), 0o600); err != nil {
		return fmt.Errorf("local: uid registry: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("local: uid registry: %w", err)
	}
	return nil
}

// adoptWorkspace gives ws to id: a new or empty workspace is chowned to
// it; one that holds files of another owner (a user's project) is shown
// through an idmapped mount where the kernel and its file system allow
// one (id.Idmap: its files stay their owner's), and refused elsewhere
// (its files would be unwritable inside, and chowning someone's tree
// silently is worse). A chowned workspace is made 0700; an idmapped one
// keeps its owner's mode.
func adoptWorkspace(ws string, id *Identity) error {
	fi, err := os.Lstat(ws)
	if err != nil {
		return fmt.Errorf("local: workspace: %w", err)
	}
	if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != id.UID {
		entries, err := os.ReadDir(ws)
		if err != nil {
			return fmt.Errorf("local: workspace: %w", err)
		}
		if len(entries) > 0 {
			ierr := IdmapAvailable(ws)
			if ierr == nil {
				st := fi.Sys().(*syscall.Stat_t)
				id.Idmap = &IdmapOwner{UID: st.Uid, GID: st.Gid}
				return nil
			}
			return fmt.Errorf("local: workspace %s belongs to uid %d and is not empty, but its sandbox runs as uid %d (sage never runs sandboxed commands as host root), "+
				"and an idmapped mount that would keep its files uid %d's is not available (%v); fix: chown -R %d:%d %s, or use a new workspace: %w",
				ws, uid, id.UID, uid, ierr, id.UID, id.GID, ws, fs.ErrPermission)
		}
		if err := os.Lchown(ws, id.UID, id.GID); err != nil {
			return fmt.Errorf("local: workspace: %w", err)
		}
	}
	if err := os.Chmod(ws, 0o700); err != nil {
		return fmt.Errorf("local: workspace: %w", err)
	}
	return nil
}

// access bits for reachable.
const (
	NeedRead  = 4
	NeedWrite = 2
	NeedExec  = 1
)

// closedError is a directory (or file) reachable found closed to a uid.
type closedError struct {
	dir         string
	mode, owner uint32
	UID         int
}

func (e *closedError) Error() string {
	return fmt.Sprintf("%s (mode %03o, owner %d) is closed to uid %d", e.dir, e.mode, e.owner, e.UID)
}

func (e *closedError) Unwrap() error { return fs.ErrPermission }

// ReachFix is the fix of a workspace ws that reachable found closed
// (err): open the directory it names for search, or, for a workspace
// outside SAGE_HOME, move it under SAGE_HOME, whose directories sage
// opens for search itself.
func ReachFix(ws string, err error) string {
	var ce *closedError
	if !errors.As(err, &ce) {
		return "fix: make every directory above it searchable by that uid (chmod o+x)"
	}
	fix := "fix: chmod o+x " + ce.dir
	if ce.dir == ws {
		fix = fmt.Sprintf("fix: chown %d %s, or use a new workspace", ce.UID, ws)
	}
	if home := sagehome.Dir(); !within(home, ws) {
		fix += ", or put the workspace under SAGE_HOME (" + home + ")"
	}
	return fix
}

// Reachable checks, from the permission bits, that id can reach p (search
// permission on every directory above it) and has need on p itself. bwrap
// runs as id, so it resolves every bind source as id.
func Reachable(p string, id *Identity, need uint32) error {
	if id == nil {
		return nil
	}
	p, err := filepath.Abs(p) // a relative path's parents end at "/" too
	if err != nil {
		return err
	}
	check := func(dir string, bits uint32) error {
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil {
			return err
		}
		mode := st.Mode & 0o777
		var have uint32
		switch {
		case int(st.Uid) == id.UID:
			have = mode >> 6
		case int(st.Gid) == id.GID:
			have = mode >> 3 & 7
		default:
			have = mode & 7
		}
		if have&bits != bits {
			return &closedError{dir: dir, mode: mode, owner: st.Uid, UID: id.UID}
		}
		return nil
	}
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		if err := check(dir, NeedExec); err != nil {
			return err
		}
		if filepath.Dir(dir) == dir { // the root
			break
		}
	}
	return check(p, need)
}

// Credential runs bwrap as the session's uid, with no supplementary
// groups.
func (id *Identity) Credential() *syscall.Credential {
	if id == nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(id.UID), Gid: uint32(id.GID), Groups: []uint32{}}
}

// OpenWorkspace opens the workspace for --bind-fd, refusing a symlink
// anywhere on its path (openat2 RESOLVE_NO_SYMLINKS), and, when bwrap runs
// as the session's uid, a workspace that is no longer that uid's. It runs
// before every command, so a workspace swapped between commands is caught.
func OpenWorkspace(ws string, id *Identity) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, ws, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if errors.Is(err, unix.ENOSYS) { // kernels before 5.6: O_NOFOLLOW on the last component
		fd, err = unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open workspace", Path: ws, Err: fmt.Errorf("%w (a symlink on its path, or it is gone): %w", fs.ErrPermission, err)}
	}
	f := os.NewFile(uintptr(fd), ws)
	if id != nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != id.UID {
			f.Close()
			return nil, &fs.PathError{Op: "open workspace", Path: ws, Err: fmt.Errorf("%w: no longer owned by the session's uid %d", fs.ErrPermission, id.UID)}
		}
	}
	return f, nil
}

// within reports whether p is dir or a path below it.
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
