//go:build linux

package quota

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/local/internal/uids"
)

// Disk is a workspace's own size-bounded file system: an ext4 image
// beside the workspace (<workspace>.img, root's, 0600), loop-mounted on
// the workspace (nosuid, nodev) for the sandbox's life. Writes past its
// size or inode count fail with ENOSPC, inside and through the host file
// API alike (-m 0: root has no reserved blocks either). The image is
// locked (flock) while mounted, so two sandboxes never mount one
// workspace twice.
type Disk struct {
	ws, img string
	lock    *os.File // the image, flock'd while the sandbox lives
	remove  bool     // an anonymous sandbox's image goes with it
	created bool     // made by this sandbox
}

// quotaMkfsTimeout bounds mkfs.ext4.
const quotaMkfsTimeout = 2 * time.Minute

// quotaProbe says why this process cannot enforce a workspace quota, or
// nil when it can: root, loop devices, mkfs.ext4.
func quotaProbe() error {
	if os.Geteuid() != 0 {
		return errors.New("sage is not root (the quota is a loop-mounted file system per workspace, which needs root)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return errors.New("no loop devices (/dev/loop-control is missing; modprobe loop)")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return errors.New("mkfs.ext4 is not installed (install e2fsprogs)")
	}
	return nil
}

// Summary says whether this process can enforce a workspace disk
// quota (sandbox.local.disk_quota_mb, opt-in).
func Summary() (enforced bool, detail string) {
	if err := quotaProbe(); err != nil {
		return false, "not enforced: a command may fill the workspace's file system (" + err.Error() +
			"); only each file's size (RLIMIT_FSIZE, file_size_limit_mb) and /tmp and /dev/shm (tmpfs sizes) are bounded"
	}
	return true, "enforceable, opt-in: sandbox.local.disk_quota_mb (and disk_quota_inodes) gives each workspace its own loop-mounted ext4 file system of that size (<workspace>.img)"
}

// Setup mounts the workspace's file system when cfg asks for a
// quota, creating its image on first use; nil when it does not. A quota
// that cannot be enforced is refused. On error nothing is left behind.
func Setup(cfg driver.Config, ws string, id *uids.Identity) (_ *Disk, err error) {
	mb, inodes := cfg.Local.DiskQuotaMB, cfg.Local.DiskQuotaInodes
	if mb == 0 && inodes == 0 {
		return nil, nil
	}
	if id.Idmapped() {
		return nil, &driver.ConfigError{Field: "sandbox.local.disk_quota_mb", Value: strconv.Itoa(mb),
			Reason: "a quota gives the workspace a file system of its own, which a folder of another owner (shown through an idmapped mount) cannot have; fix: set it to 0, or use a new workspace"}
	}
	if err := quotaProbe(); err != nil {
		return nil, &driver.ConfigError{Field: "sandbox.local.disk_quota_mb", Value: strconv.Itoa(mb),
			Reason: "cannot be enforced: " + err.Error() + "; fix: run sage as root on a host with loop devices and mkfs.ext4, or set it to 0"}
	}
	if mb < driver.MinDiskQuotaMB {
		return nil, &driver.ConfigError{Field: "sandbox.local.disk_quota_mb", Value: strconv.Itoa(mb),
			Reason: fmt.Sprintf("must be at least %d", driver.MinDiskQuotaMB)}
	}
	q := &Disk{ws: ws, img: ws + ".img", remove: cfg.SandboxID == ""}
	created, err := q.ensureImage(mb, inodes, id)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			q.lock.Close()
			if created || q.remove {
				os.Remove(q.img)
			}
		}
	}()
	mounted, err := q.mountedHere()
	if err != nil {
		return nil, err
	}
	if !mounted { // else left by a sandbox that died: ours now
		if err := q.mount(id, created); err != nil {
			return nil, err
		}
	}
	if id != nil {
		if err = os.Lchown(ws, id.UID, id.GID); err == nil {
			err = os.Chmod(ws, 0o700)
		}
		if err != nil {
			q.unmount()
			return nil, fmt.Errorf("local: workspace quota: %w", err)
		}
	}
	q.created = created
	return q, nil
}

// ensureImage opens and locks the image, making it first when missing
// (under a temporary name, linked into place once complete, so a crash
// never leaves a half-made image under the real name). created says it
// was made now.
func (q *Disk) ensureImage(mb, inodes int, id *uids.Identity) (created bool, err error) {
	size := int64(mb) << 20
	if _, err := os.Lstat(q.img); errors.Is(err, fs.ErrNotExist) {
		if created, err = q.makeImage(size, inodes, id); err != nil {
			return false, err
		}
	}
	fd, err := unix.Open(q.img, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("local: workspace quota image %s: %w", q.img, err)
	}
	f := os.NewFile(uintptr(fd), q.img)
	fail := func(e error) (bool, error) {
		f.Close()
		if created {
			os.Remove(q.img)
		}
		return false, e
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(fmt.Errorf("local: workspace quota image %s: %w", q.img, err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 {
		return fail(fmt.Errorf("local: workspace quota image %s is not a regular file of root's: %w; fix: remove it", q.img, fs.ErrPermission))
	}
	if st.Size != size {
		return fail(&driver.ConfigError{Field: "sandbox.local.disk_quota_mb", Value: strconv.Itoa(mb),
			Reason: fmt.Sprintf("the workspace's file system %s was made with %d MB; fix: set disk_quota_mb to %d, or remove the image (and with it the workspace's files) to start over",
				q.img, st.Size>>20, st.Size>>20)})
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(fmt.Errorf("local: workspace %s is in use by another sandbox with a disk quota: %w; fix: close that sandbox first, or use another session", q.ws, err))
	}
	q.lock = f
	return created, nil
}

// makeImage makes a sparse image of size bytes with an ext4 file system
// whose root belongs to id, and links it to q.img.
func (q *Disk) makeImage(size int64, inodes int, id *uids.Identity) (linked bool, err error) {
	tmp := fmt.Sprintf("%s.tmp-%d", q.img, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("local: workspace quota image: %w", err)
	}
	defer os.Remove(tmp)
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("local: workspace quota image: %w", err)
	}
	owner := "0:0"
	if id != nil {
		owner = fmt.Sprintf("%d:%d", id.UID, id.GID)
	}
	args := []string{"-q", "-F", "-m", "0", "-E", "root_owner=" + owner}
	if inodes > 0 {
		args = append(args, "-N", strconv.Itoa(inodes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), quotaMkfsTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mkfs.ext4", append(args, tmp)...)
	out := &cappedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("local: workspace quota: mkfs.ext4 %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	switch err := os.Link(tmp, q.img); {
	case errors.Is(err, fs.ErrExist): // another sandbox won the race: use its image
		return false, nil
	case err != nil:
		return false, fmt.Errorf("local: workspace quota image: %w", err)
	}
	return true, nil
}

// mount attaches the image to a free loop device (autoclear: it detaches
// when the file system is unmounted) and mounts it on the workspace,
// through a descriptor that refuses symlinks.
func (q *Disk) mount(id *uids.Identity, fresh bool) error {
	ents, err := os.ReadDir(q.ws)
	if err != nil {
		return fmt.Errorf("local: workspace: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("local: workspace %s holds files outside its quota file system, which mounting it would hide: %w; fix: use a new workspace, or move the files away",
			q.ws, fs.ErrExist)
	}
	// The loop device gets its own open file of the image: it holds it
	// while attached, and the lock must not live on with it (a sandbox
	// that died would keep the workspace locked).
	img, err := reopenSame(q.lock)
	if err != nil {
		return fmt.Errorf("local: workspace quota image %s: %w", q.img, err)
	}
	loop, err := attachLoop(int(img.Fd()))
	img.Close()
	if err != nil {
		return fmt.Errorf("local: workspace quota: %w", err)
	}
	defer loop.Close() // the mount holds the device from here on
	dir, err := uids.OpenWorkspace(q.ws, id)
	if err != nil {
		unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
		return err
	}
	defer dir.Close()
	target := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd()))
	if err := unix.Mount(loop.Name(), target, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("local: workspace quota: mount %s on %s: %w", loop.Name(), q.ws, err)
	}
	if fresh {
		if err := os.Remove(filepath.Join(q.ws, "lost+found")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			q.unmount()
			return fmt.Errorf("local: workspace quota: %w", err)
		}
	}
	return nil
}

// mountedHere reports whether the workspace already has the image's file
// system mounted on it (left by a sandbox that died); anything else
// mounted there is refused.
func (q *Disk) mountedHere() (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("local: workspace quota: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || uids.UnescapeMount(fields[4]) != q.ws {
			continue
		}
		src := ""
		for i, fl := range fields {
			if fl == "-" && i+2 < len(fields) {
				src = fields[i+2]
			}
		}
		if backing, err := loopBacking(src); err == nil && backing == q.img {
			return true, nil
		}
		return false, fmt.Errorf("local: workspace %s has %s mounted on it, not its quota image %s: %w; fix: umount %s",
			q.ws, src, q.img, fs.ErrExist, q.ws)
	}
	return false, sc.Err()
}

// loopBacking is the file behind a loop device such as /dev/loop3.
func loopBacking(dev string) (string, error) {
	name := strings.TrimPrefix(dev, "/dev/")
	if !strings.HasPrefix(name, "loop") || strings.Contains(name, "/") {
		return "", fs.ErrNotExist
	}
	b, err := os.ReadFile("/sys/block/" + name + "/loop/backing_file")
	return strings.TrimSuffix(string(b), "\n"), err
}

// unmount takes the file system off the workspace: lazily when it stays
// busy. The loop device detaches itself once the file system is gone.
func (q *Disk) unmount() error {
	var err error
	for range 20 {
		if err = unix.Unmount(q.ws, unix.UMOUNT_NOFOLLOW); !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(q.ws, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("local: workspace quota: umount %s: %w", q.ws, err)
	}
	return nil
}

// Release unmounts the workspace's file system, unlocks its image and,
// for an anonymous sandbox, removes it. Nil-safe.
func (q *Disk) Release() error {
	if q == nil {
		return nil
	}
	err := q.unmount()
	q.lock.Close()
	if q.remove && err == nil {
		if rerr := os.Remove(q.img); rerr != nil {
			err = fmt.Errorf("local: workspace quota: %w", rerr)
		}
	}
	return err
}

// Abandon is Release when the sandbox could not be made: an image made
// for it goes too.
func (q *Disk) Abandon() {
	if q != nil && q.Release() == nil && q.created {
		os.Remove(q.img)
	}
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
