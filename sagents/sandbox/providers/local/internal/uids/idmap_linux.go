//go:build linux

package uids

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/internal/procfs"
)

// An idmapped workspace is a user's own folder, owned by another uid
// (root's project, as root), that sage neither chowns nor refuses: an
// idmapped bind mount of it (open_tree OPEN_TREE_CLONE, then
// mount_setattr MOUNT_ATTR_IDMAP, Linux 5.12+, on ext4, xfs, btrfs,
// tmpfs and others) shows its owner as the sandbox's uid, and what the
// sandbox writes lands on disk owned by the folder's owner. The mount is
// attached on a private staging directory of the sandbox's runtime
// directory, which bwrap (or runsc) binds as the workspace; it is nosuid
// and nodev, and the seccomp filter refuses set-user-ID and set-group-ID
// bits, so a command cannot leave a set-user-ID file of the owner (root)
// behind. Only the owner's uid and gid are mapped: files of other owners
// show as nobody.

// StagingName is the idmapped mount's directory in the runtime dir.
const StagingName = "workspace-idmapped"

// IdmapOwner is the folder's owner on disk, which the sandbox's uid
// stands for through the idmapped mount.
type IdmapOwner struct{ UID, GID uint32 }

// IdmappedMount is an attached idmapped mount of a workspace.
type IdmappedMount struct {
	Staging string // the directory the workspace is mounted on
	once    sync.Once
	err     error
}

// rootStandIn is the uid (and gid) on disk that root's view maps to in
// the idmapped mount. runsc's gofer creates a file as root, then chowns
// it to the sandbox's uid (whose view is the owner on disk): without a
// disk uid for root's view the create fails with EOVERFLOW. bwrap's
// commands never act as root there (their user namespace maps the
// sandbox's uid alone), and a file of this uid on disk shows as nobody
// inside bwrap, as any unmapped one does.
const rootStandIn = 65534

// standIn is rootStandIn, or the id below it when the owner is that id.
func standIn(owner uint32) int {
	if owner == rootStandIn {
		return rootStandIn - 1
	}
	return rootStandIn
}

// idmapUserns returns a user namespace that maps from (the folder's
// owner on disk) to (the sandbox's uid), and root's view to a stand-in
// (rootStandIn), as an open descriptor: the mapping mount_setattr gives
// the mount. It is held by a short-lived /bin/sh that waits on a pipe;
// the namespace lives on in the descriptor after it exits.
func idmapUserns(from IdmapOwner, to *Identity) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	cmd := exec.Command("/bin/sh", "-c", "read _")
	cmd.Stdin, cmd.Env, cmd.Dir = r, []string{}, "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(from.UID), HostID: to.UID, Size: 1}, {ContainerID: standIn(from.UID), HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(from.GID), HostID: to.GID, Size: 1}, {ContainerID: standIn(from.GID), HostID: 0, Size: 1}}}
	err = cmd.Start()
	r.Close()
	if err != nil {
		return nil, fmt.Errorf("a user namespace for the mapping: %w", err)
	}
	defer func() { w.Close(); cmd.Process.Kill(); cmd.Wait() }()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("a user namespace for the mapping: %w", err)
	}
	return f, nil
}

// idmapClone returns a detached idmapped clone of dir's mount at dir
// (not its submounts), nosuid and nodev, mapping from to to.
func idmapClone(dir string, from IdmapOwner, to *Identity) (*os.File, error) {
	ns, err := idmapUserns(from, to)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return nil, fmt.Errorf("open_tree %s: %w", dir, err)
	}
	tree := os.NewFile(uintptr(fd), dir)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		tree.Close()
		return nil, fmt.Errorf("mount_setattr MOUNT_ATTR_IDMAP on %s (%s): %w", dir, fsName(dir), err)
	}
	return tree, nil
}

// idmapProbes caches, per file system (st_dev), whether it takes an
// idmapped mount.
var idmapProbes sync.Map

// IdmapAvailable says whether dir's file system takes an idmapped mount
// here, or why not (the kernel, the file system, privileges).
func IdmapAvailable(dir string) error {
	if !UseIdmap {
		return errors.New("idmapped workspaces are switched off")
	}
	if os.Geteuid() != 0 {
		return errors.New("only root makes idmapped mounts (as another user, commands run as that user and need none)")
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	if v, ok := idmapProbes.Load(st.Dev); ok {
		err, _ := v.(error)
		return err
	}
	tree, err := idmapClone(dir, IdmapOwner{UID: st.Uid, GID: st.Gid}, &Identity{UID: 65534, GID: 65534})
	if err == nil {
		tree.Close() // never attached: closing it frees it
	} else {
		err = idmapUnavailable(err)
	}
	idmapProbes.Store(st.Dev, err)
	return err
}

// idmapUnavailable words why an idmapped mount could not be made.
func idmapUnavailable(err error) error {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("idmapped mounts need Linux 5.12 or later (%v)", err)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("the file system does not take idmapped mounts, or the kernel is older than 5.12 (%v); ext4, xfs, btrfs and tmpfs do on 5.12+", err)
	}
	return err
}

// UseIdmap is switched off only by tests of the refusal that stands
// where idmapped mounts are unavailable.
var UseIdmap = true

// MountIdmapped attaches the idmapped clone of ws on the staging
// directory of runtimeDir and records the owning process beside it (so a
// later sandbox can remove it, should this process die with it mounted).
func MountIdmapped(ws, runtimeDir string, to *Identity) (*IdmappedMount, error) {
	from := *to.Idmap
	staging := filepath.Join(runtimeDir, StagingName)
	releaseStale(staging)
	if err := os.Mkdir(staging, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("local: idmapped workspace: %w", err)
	}
	tree, err := idmapClone(ws, from, to)
	if err != nil {
		os.Remove(staging)
		return nil, fmt.Errorf("local: idmapped workspace: %w", idmapUnavailable(err))
	}
	defer tree.Close()
	if err := os.WriteFile(staging+".owner", []byte(ProcToken(os.Getpid())), 0o600); err != nil {
		os.Remove(staging)
		return nil, fmt.Errorf("local: idmapped workspace: %w", err)
	}
	if err := unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, staging, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		os.Remove(staging)
		os.Remove(staging + ".owner")
		return nil, fmt.Errorf("local: idmapped workspace: move_mount onto %s: %w", staging, err)
	}
	return &IdmappedMount{Staging: staging}, nil
}

// Release unmounts the staging mount and removes its directory; a nil
// m is a no-op. Idempotent.
func (m *IdmappedMount) Release() error {
	if m == nil {
		return nil
	}
	m.once.Do(func() {
		if err := unix.Unmount(m.Staging, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			m.err = fmt.Errorf("local: unmount the idmapped workspace %s: %w", m.Staging, err)
			return
		}
		os.Remove(m.Staging)
		os.Remove(m.Staging + ".owner")
	})
	return m.err
}

// ProcToken identifies a live process across pid reuse: its pid and
// start time.
func ProcToken(pid int) string {
	f, ok := procfs.Stat(pid)
	start := "gone"
	if ok && len(f) > 19 && f[0] != "Z" && f[0] != "X" {
		start = f[19]
	}
	return strconv.Itoa(pid) + " " + start
}

// releaseStale unmounts a staging mount whose recorded owner is gone (a
// sandbox killed with it mounted).
func releaseStale(staging string) {
	b, err := os.ReadFile(staging + ".owner")
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(strings.Fields(string(b) + " 0")[0])
	if tok := strings.TrimSpace(string(b)); pid > 0 && !strings.HasSuffix(tok, " gone") && ProcToken(pid) == tok {
		return // its owner lives
	}
	(&IdmappedMount{Staging: staging}).Release()
}

// SweepIdmapped releases the stale staging mounts of sandboxes under
// home that died with theirs mounted (SIGKILL), found in mountinfo.
func SweepIdmapped(home string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	prefix := filepath.Clean(home) + "/"
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := UnescapeMount(fields[4])
		if strings.HasPrefix(mp, prefix) && filepath.Base(mp) == StagingName {
			releaseStale(mp)
		}
	}
}

// fsName names dir's file system type for messages.
func fsName(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return "unknown file system"
	}
	if n, ok := map[int64]string{0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
		0x794c7630: "overlayfs", 0x6969: "nfs", 0x2fc12fc1: "zfs", 0x65735546: "fuse", 0xFF534D42: "cifs",
		0x5346544e: "ntfs", 0x4d44: "vfat", 0xf2f52010: "f2fs"}[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}

// IdmapSummary says, for sage doctor, whether a folder of another owner
// (a root user's project) works as a workspace on dir's file system: as
// root, through an idmapped mount; else why not, with the fix.
func IdmapSummary(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			dir = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := IdmapAvailable(dir); err != nil {
		return "", fmt.Errorf("%s (%s): %v; a non-empty folder of another owner is refused as a workspace (fix: chown it to the sandbox's uid, or use a new workspace)", dir, fsName(dir), err)
	}
	return fmt.Sprintf("%s (%s) takes idmapped mounts: a folder of another owner (a root user's project) works as a workspace, its owner shown as the sandbox's uid and its files still its owner's", dir, fsName(dir)), nil
}

// UnescapeMount decodes a path field of /proc/self/mountinfo, where
// space, tab, newline and backslash are written as octal escapes (\040).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
