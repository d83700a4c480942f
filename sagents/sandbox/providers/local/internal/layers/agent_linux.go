//go:build linux

package layers

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
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
	Op string `json:"op"` // "mount", "view", "freeze", "thaw"
	// Lowers are the read-only layers, topmost first (host paths).
	Lowers []string `json:"lowers,omitempty"`
	Upper  string   `json:"upper,omitempty"`
	Work   string   `json:"work,omitempty"`
	// Target is where "mount" attaches, inside the sandbox.
	Target string `json:"target,omitempty"`
}

// reply answers a request; a mount comes with its descriptor.
type reply struct {
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
}

// Main serves the host until it closes its end; it runs in the sandbox's
// outer user namespace (bwrap --userns) with its capabilities.
func Main() int {
	sock := os.NewFile(agentSockFD, "layers-socket")
	ns := newNSThread(agentMntFD)
	if ns.err != nil {
		send(sock, reply{Err: "enter the sandbox's mount namespace: " + ns.err.Error(), Errno: errnoOf(ns.err)}, -1)
		return 1
	}
	cur := -1 // the mount attached at the target (the last "mount")
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
			send(sock, reply{Err: "bad request: " + err.Error()}, -1)
			continue
		}
		fd, err := serve(ns, &cur, req)
		r := reply{}
		if err != nil {
			r = reply{Err: err.Error(), Errno: errnoOf(err)}
		}
		send(sock, r, fd)
		if fd >= 0 && fd != cur {
			unix.Close(fd)
		}
	}
}

func serve(ns *nsThread, cur *int, req request) (int, error) {
	switch req.Op {
	case "hello":
		return -1, nil
	case "mount", "view":
		fd, err := overlay(req)
		if err != nil || req.Op == "view" {
			return fd, err
		}
		if err := ns.do(func() error { return attach(fd, req.Target) }); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if *cur >= 0 {
			unix.Close(*cur)
		}
		*cur = fd
		return fd, nil
	case "freeze", "thaw":
		if *cur < 0 {
			return -1, errors.New("no layered mount to " + req.Op)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if req.Op == "thaw" {
			attr = &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		}
		return -1, ns.do(func() error {
			if err := unix.MountSetattr(*cur, "", unix.AT_EMPTY_PATH, attr); err != nil {
				return &os.SyscallError{Syscall: "mount_setattr", Err: err}
			}
			return nil
		})
	}
	return -1, fmt.Errorf("unknown op %q", req.Op)
}

// overlay builds a detached overlay mount of req's layers (no upper: a
// read-only view).
func overlay(req request) (int, error) {
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
	for _, l := range req.Lowers {
		if err := set("lowerdir+", l); err != nil {
			return -1, err
		}
	}
	if req.Upper != "" {
		if err := set("upperdir", req.Upper); err != nil {
			return -1, err
		}
		if err := set("workdir", req.Work); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, &os.SyscallError{Syscall: "fsconfig create overlay", Err: err}
	}
	attrs := 0
	if req.Upper == "" {
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

func send(sock *os.File, r reply, fd int) {
	b, _ := json.Marshal(r)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
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

// nsThread is one OS thread in the sandbox's mount namespace, running
// the functions given to do, one at a time.
type nsThread struct {
	err  error
	jobs chan func() error
	errs chan error
}

func newNSThread(mntFD int) *nsThread {
	t := &nsThread{jobs: make(chan func() error), errs: make(chan error)}
	ready := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the agent
		err := unix.Unshare(unix.CLONE_FS)
		if err == nil {
			err = unix.Setns(mntFD, unix.CLONE_NEWNS)
		}
		ready <- err
		if err != nil {
			return
		}
		for f := range t.jobs {
			t.errs <- f()
		}
	}()
	t.err = <-ready
	return t
}

func (t *nsThread) do(f func() error) error {
	t.jobs <- f
	return <-t.errs
}
