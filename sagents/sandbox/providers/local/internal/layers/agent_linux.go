//go:build linux

package layers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Name is the argv[0] base name that makes a linking program the agent.
const Name = "sage-layers"

// Descriptors the agent gets (through bwrap, which passes them on).
const (
	agentMntFD  = 3 // the sandbox's mount namespace
	agentSockFD = 4 // the host's end of the conversation (SOCK_SEQPACKET)
)

// moveMountBeneath is MOVE_MOUNT_BENEATH (Linux 6.5), not in x/sys yet.
const moveMountBeneath = 0x200

// maxMessage bounds a request (500 layer paths fit many times over).
const maxMessage = 1 << 20

func init() {
	if len(os.Args) > 0 && os.Args[0][strings.LastIndexByte(os.Args[0], '/')+1:] == Name {
		os.Exit(Main())
	}
}

// request is one operation, JSON over the socket.
type request struct {
	Op string `json:"op"` // "mount", "prepare", "view", "freeze", "thaw", "store", "copy"
	// Lowers are the read-only layers, topmost first (paths in the
	// agent's mount namespace): "view", "copy".
	Lowers []string `json:"lowers,omitempty"`
	// Mounts are what "mount" attaches: all are built before the first
	// is attached, so that a bad layer changes nothing. "prepare" builds
	// them ahead, for a later "mount" of the same spec.
	Mounts []mountSpec `json:"mounts,omitempty"`
	// Freeze are the mounts "mount" makes read-only first (all or none),
	// before it builds the new ones: a checkpoint or a rollback in one
	// request. Should it fail before the first attach, they are thawed.
	Freeze []string `json:"freeze,omitempty"`
	// Targets are the mounts "freeze" and "thaw" act on, inside the
	// sandbox; Target is the directory "store" copies the mode of.
	Targets []string `json:"targets,omitempty"`
	Target  string   `json:"target,omitempty"`
	// Path is where "store" mounts its tmpfs in the agent's own mount
	// namespace, or where "copy" copies to; Size bounds the tmpfs.
	Path string `json:"path,omitempty"`
	Size int64  `json:"size,omitempty"`
}

// mountSpec is one overlay of a "mount" request.
type mountSpec struct {
	Lowers []string `json:"lowers"`
	Upper  string   `json:"upper"`
	Work   string   `json:"work"`
	Target string   `json:"target"`
}

// reply answers a request; a mount comes with its descriptors.
type reply struct {
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Mode  uint32 `json:"mode,omitempty"` // "store": the target's permission bits
}

// Main serves the host until it closes its end; it runs in the sandbox's
// outer user namespace (bwrap --userns) with its capabilities.
func Main() int {
	sock := os.NewFile(agentSockFD, "layers-socket")
	ns := newNSThread(agentMntFD)
	if ns.err != nil {
		send(sock, reply{Err: "enter the sandbox's mount namespace: " + ns.err.Error(), Errno: errnoOf(ns.err)}, nil)
		return 1
	}
	cur := map[string]int{} // the mount attached at each target (the last "mount" there)
	ahead := prepared{}     // overlays built ahead ("prepare"), by spec
	buf := make([]byte, maxMessage)
	for {
		n, _, _, _, err := unix.Recvmsg(agentSockFD, buf, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sage-layers: read a request:", err)
			return 1
		}
		if n == 0 { // the host closed its end
			return 0
		}
		var req request
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			send(sock, reply{Err: "bad request: " + err.Error()}, nil)
			continue
		}
		r, fds, err := serve(ns, cur, ahead, req)
		if err != nil {
			r = reply{Err: err.Error(), Errno: errnoOf(err)}
		}
		send(sock, r, fds)
		for _, fd := range fds {
			if !slices.Contains(slices.Collect(maps.Values(cur)), fd) {
				unix.Close(fd)
			}
		}
	}
}

func serve(ns *nsThread, cur map[string]int, ahead prepared, req request) (reply, []int, error) {
	switch req.Op {
	case "hello":
		return reply{}, nil, nil
	case "view":
		fd, err := overlay(req.Lowers, "", "")
		if err != nil {
			return reply{}, nil, err
		}
		return reply{}, []int{fd}, nil
	case "mount":
		defer ahead.drop() // built for the state before: stale now
		if err := setRDONLY(ns, cur, req.Freeze, true); err != nil {
			return reply{}, nil, err
		}
		fds, err := mountAll(ns, cur, ahead, req.Mounts)
		if err != nil && !errors.Is(err, unix.ENOTRECOVERABLE) {
			setRDONLY(ns, cur, req.Freeze, false)
		}
		return reply{}, fds, err
	case "prepare":
		return reply{}, nil, ahead.build(req.Mounts)
	case "freeze", "thaw":
		return reply{}, nil, setRDONLY(ns, cur, req.Targets, req.Op == "freeze")
	case "store":
		return store(ns, req)
	case "copy":
		return reply{}, nil, copyIn(req.Path, req.Lowers)
	}
	return reply{}, nil, fmt.Errorf("unknown op %q", req.Op)
}

// prepared are overlays built ahead of the "mount" that attaches them
// (the next checkpoint's, the next rollback's), by their spec: the
// creation of an overlay with an upper (overlayfs sets up its work
// directory, journalled operations on the upper's file system: 0.5-4 ms
// on ext4) then happens between commands rather than in the mount. A
// mount takes one only when its spec is the same to the byte; every
// "mount" drops the rest (their layers are the state before it).
//
// One built for a checkpoint has the live upper among its lowers, which
// the sandbox writes until the mount freezes it: overlayfs calls changing
// a lower under a mounted overlay undefined. What it caches at creation
// is the layers' root directories (no lookup goes through a detached
// mount nobody holds but the agent), and the freeze comes before the
// attach: TestCheckpointAheadWindow writes, removes and renames files in
// that window and checks the checkpoint and a rollback see them all.
type prepared map[string]int

func specKey(m mountSpec) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// build builds each of ms not built yet.
func (p prepared) build(ms []mountSpec) error {
	for _, m := range ms {
		k := specKey(m)
		if _, ok := p[k]; ok {
			continue
		}
		fd, err := overlay(m.Lowers, m.Upper, m.Work)
		if err != nil {
			return err
		}
		p[k] = fd
	}
	return nil
}

// take is the overlay built ahead for m, or a new one.
func (p prepared) take(m mountSpec) (int, error) {
	k := specKey(m)
	if fd, ok := p[k]; ok {
		delete(p, k)
		return fd, nil
	}
	return overlay(m.Lowers, m.Upper, m.Work)
}

// drop closes the overlays built ahead and not taken, on another thread:
// the last reference of an overlay with an upper syncs the upper's file
// system as it goes, which the next request does not wait for.
func (p prepared) drop() {
	if len(p) == 0 {
		return
	}
	fds := slices.Collect(maps.Values(p))
	clear(p)
	go func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
}

// mountAll builds every overlay of ms (or takes the one built ahead),
// then attaches each at its target in place of what is there.
func mountAll(ns *nsThread, cur map[string]int, ahead prepared, ms []mountSpec) ([]int, error) {
	fds := make([]int, 0, len(ms))
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	for _, m := range ms {
		fd, err := ahead.take(m)
		if err != nil {
			closeAll()
			return nil, err
		}
		fds = append(fds, fd)
	}
	for i, m := range ms {
		if err := ns.do(func() error { return attach(fds[i], m.Target) }); err != nil {
			// The ones attached before stay (each is a whole state);
			// the caller hears which did not.
			for _, fd := range fds[i:] {
				unix.Close(fd)
			}
			if i == 0 {
				return nil, fmt.Errorf("%s: %w", m.Target, err)
			}
			return nil, fmt.Errorf("%s: %v (the mounts before it were replaced): %w", m.Target, err, unix.ENOTRECOVERABLE)
		}
		if old, ok := cur[m.Target]; ok {
			unix.Close(old)
		}
		cur[m.Target] = fds[i]
	}
	return fds, nil
}

// setRDONLY freezes (or thaws) the mounts at targets; a freeze that
// fails thaws those it froze, changing nothing.
func setRDONLY(ns *nsThread, cur map[string]int, targets []string, rdonly bool) error {
	attr := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	if rdonly {
		attr = &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	}
	for i, t := range targets {
		fd, ok := cur[t]
		if !ok {
			return errors.New("no layered mount at " + t)
		}
		err := ns.do(func() error {
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
				return &os.SyscallError{Syscall: "mount_setattr " + t, Err: err}
			}
			return nil
		})
		if err != nil {
			if rdonly {
				setRDONLY(ns, cur, targets[:i], false)
			}
			return err
		}
	}
	return nil
}

// store mounts a new tmpfs of req.Size bytes at req.Path in the agent's
// own mount namespace (the sandbox never sees it: the layers of a
// sandbox's tmpfs live there, under the same bound) and returns it with
// the mode of req.Target inside the sandbox. It refuses a target with
// mounts under it: an overlay put there would hide them.
func store(ns *nsThread, req request) (reply, []int, error) {
	var st unix.Stat_t
	if err := ns.do(func() error { return unix.Stat(req.Target, &st) }); err != nil {
		return reply{}, nil, &os.SyscallError{Syscall: "stat " + req.Target, Err: err}
	}
	// The thread's mounts in the sandbox's namespace, through the agent's
	// /proc (the sandbox's shows its own pids only), opened while the
	// thread is in it: the file shows the namespace of its opening.
	// Paths are from the sandbox's root.
	var b []byte
	err := ns.do(func() error {
		fd, err := unix.Openat(ns.proc, "thread-self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.SyscallError{Syscall: "open mountinfo", Err: err}
		}
		f := os.NewFile(uintptr(fd), "mountinfo")
		defer f.Close()
		b, err = io.ReadAll(io.LimitReader(f, maxMessage))
		return err
	})
	if err != nil {
		return reply{}, nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], req.Target+"/") {
			return reply{}, nil, fmt.Errorf("a mount is under %s (%s): %w", req.Target, f[4], unix.ENOTEMPTY)
		}
	}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return reply{}, nil, &os.SyscallError{Syscall: "fsopen tmpfs", Err: err}
	}
	defer unix.Close(fs)
	if req.Size > 0 {
		if err := unix.FsconfigSetString(fs, "size", strconv.FormatInt(req.Size, 10)); err != nil {
			return reply{}, nil, fmt.Errorf("tmpfs size: %w", err)
		}
	}
	if err := unix.FsconfigSetString(fs, "mode", "0700"); err != nil {
		return reply{}, nil, fmt.Errorf("tmpfs mode: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return reply{}, nil, &os.SyscallError{Syscall: "fsconfig create tmpfs", Err: err}
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return reply{}, nil, &os.SyscallError{Syscall: "fsmount tmpfs", Err: err}
	}
	defer unix.Close(mnt)
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, req.Path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return reply{}, nil, &os.SyscallError{Syscall: "move_mount " + req.Path, Err: err}
	}
	fd, err := unix.Open(req.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return reply{}, nil, &os.SyscallError{Syscall: "open " + req.Path, Err: err}
	}
	return reply{Mode: st.Mode & 0o7777}, []int{fd}, nil
}

// copyIn copies the state of lowers (topmost first) into the directory
// dst, with the agent's rights in the sandbox's user namespace: what it
// creates is the sandbox's uid's.
func copyIn(dst string, lowers []string) error {
	if len(lowers) == 1 {
		return Copy(dst, lowers[0], nil)
	}
	fd, err := overlay(lowers, "", "")
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return Copy(dst, "/proc/self/fd/"+strconv.Itoa(fd), nil)
}

// overlay builds a detached overlay mount of req's layers (no upper: a
// read-only view).
func overlay(lowers []string, upper, work string) (int, error) {
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, &os.SyscallError{Syscall: "fsopen overlay", Err: err}
	}
	defer unix.Close(fs)
	set := func(k, v string) error {
		if err := unix.FsconfigSetString(fs, k, v); err != nil {
			return fmt.Errorf("overlay %s=%s: %w", k, v, err)
		}
		return nil
	}
	if err := unix.FsconfigSetFlag(fs, "userxattr"); err != nil {
		return -1, fmt.Errorf("overlay userxattr: %w", err)
	}
	if err := set("source", "sage-layers"); err != nil {
		return -1, err
	}
	for _, l := range lowers {
		if err := set("lowerdir+", l); err != nil {
			return -1, err
		}
	}
	if upper != "" {
		if err := set("upperdir", upper); err != nil {
			return -1, err
		}
		if err := set("workdir", work); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, &os.SyscallError{Syscall: "fsconfig create overlay", Err: err}
	}
	attrs := 0
	if upper == "" {
		attrs = unix.MOUNT_ATTR_RDONLY
	}
	fd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attrs|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, &os.SyscallError{Syscall: "fsmount overlay", Err: err}
	}
	return fd, nil
}

// attach puts the mount fd at target in place of what is there: beneath
// it first, then the old one detached (processes with a descriptor or
// their directory in it keep it, read-only once frozen).
func attach(fd int, target string) error {
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH|moveMountBeneath); err != nil {
		return &os.SyscallError{Syscall: "move_mount beneath " + target, Err: err}
	}
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
		return &os.SyscallError{Syscall: "umount " + target, Err: err}
	}
	return nil
}

func send(sock *os.File, r reply, fds []int) {
	b, _ := json.Marshal(r)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	unix.Sendmsg(int(sock.Fd()), b, oob, nil, 0)
}

func errnoOf(err error) int {
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en)
	}
	return 0
}

// nsThread is the agent's one OS thread (its requests are served on it,
// locked): do runs a function with the thread in the sandbox's mount
// namespace and brings it back to the agent's own, where the layers'
// paths resolve. Switching costs two setns calls; handing work to another
// thread cost two wake-ups, which a loaded machine makes slow.
type nsThread struct {
	err     error
	sandbox int // the sandbox's mount namespace
	own     int // the agent's
	proc    int // the agent's /proc
}

// newNSThread locks the calling goroutine to its thread for good and
// gives the thread a file-system context of its own (unshare CLONE_FS),
// which setns of a mount namespace needs.
func newNSThread(mntFD int) *nsThread {
	runtime.LockOSThread() // never unlocked: the thread ends with the agent
	t := &nsThread{sandbox: mntFD, own: -1, proc: -1}
	if t.err = unix.Unshare(unix.CLONE_FS); t.err != nil {
		return t
	}
	if t.own, t.err = unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); t.err != nil {
		return t
	}
	if t.proc, t.err = unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); t.err != nil {
		return t
	}
	// Enter once, to fail here rather than at the first request.
	if t.err = unix.Setns(t.sandbox, unix.CLONE_NEWNS); t.err != nil {
		return t
	}
	if err := unix.Setns(t.own, unix.CLONE_NEWNS); err != nil {
		fmt.Fprintln(os.Stderr, "sage-layers: back to its own mount namespace:", err)
		os.Exit(1)
	}
	return t
}

func (t *nsThread) do(f func() error) error {
	if err := unix.Setns(t.sandbox, unix.CLONE_NEWNS); err != nil {
		return &os.SyscallError{Syscall: "setns", Err: err}
	}
	err := f()
	if err := unix.Setns(t.own, unix.CLONE_NEWNS); err != nil {
		// Its next request would resolve the layers' paths in the
		// sandbox: the agent ends, and the host hears it gone.
		fmt.Fprintln(os.Stderr, "sage-layers: back to its own mount namespace:", err)
		os.Exit(1)
	}
	return err
}
