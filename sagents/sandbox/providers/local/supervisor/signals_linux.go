package supervisor

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// The signal relay: a session behaves like one machine, where a command
// may signal (kill, kill -0, pkill, kill of a process group, kill -1) the
// processes of a background task or of another command, while each
// command stays in a Landlock domain of its own (domain_linux.go), which
// keeps the supervisor and the other commands out of its reach for
// ptrace, pidfd_getfd and /proc, and lets a timeout reach every process
// of the command.
//
// So each domain's thread also installs a seccomp filter before it forks
// its command, which every process of the command inherits: the
// process-directed signal calls (kill, rt_sigqueueinfo,
// pidfd_send_signal) become user notifications (SECCOMP_RET_USER_NOTIF)
// that the supervisor, in no domain, answers. It delivers the signal
// itself, through a pidfd (no pid reuse between its check and the
// signal), to any process of the sandbox but the supervisor and pid 1
// (the network bridge, when there is one): those get EPERM, as they
// would from the kernel. The caller's own process, a call it cannot
// read, and everything the relay does not emulate go back to the kernel
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE), which applies the caller's Landlock
// domain: that is the behaviour without the relay, never more. Before it
// acts, the relay checks that the caller still waits
// (SECCOMP_IOCTL_NOTIF_ID_VALID), so what it read of the caller (its
// status, its memory, its descriptor) was the caller's.
//
// Thread-directed signals (tgkill, rt_tgsigqueueinfo: raise,
// pthread_kill, the Go runtime's preemption) are frequent and no shell or
// kill tool sends them to another process: the filter passes them to the
// kernel, which scopes them to the command's domain, except those aimed
// at pid 1's or the supervisor's threads, which it refuses (EPERM) at
// once. The thread of the supervisor that forked the command is in the
// command's domain (domain_linux.go): without the filter's and the
// relay's check on every way to name it (kill, sigqueue and tkill of its
// thread id, a pidfd of it), a command could end the supervisor with a
// SIGTERM to that thread. tkill, rare, goes to the relay. ptrace is
// untouched: scoped by the domains, and the supervisor is not dumpable.
//
// A domain's thread itself ends its command with kill(-1) (domain.signal,
// domain.kill), which Landlock scopes to the domain: it passes a random
// marker, the relay's secret, in kill's unused third argument, which the
// filter lets through to the kernel. No command can read it (it is in the
// kernel's filter and in the memory and registers of the supervisor, not
// dumpable). So the host's timeouts never wait on the relay.
//
// The supervisor reads the notifications of every command on one thread
// (one epoll set over the listeners), and closes a command's listener
// when the last process that holds its filter is gone (EPOLLHUP).

// Seccomp's constants (linux/seccomp.h, linux/filter.h, linux/audit.h).
const (
	seccompSetModeFilter   = 1
	seccompFlagNewListener = 1 << 3
	seccompRetAllow        = 0x7fff0000
	seccompRetUserNotif    = 0x7fc00000
	seccompRetErrno        = 0x00050000
	notifFlagContinue      = 1 // SECCOMP_USER_NOTIF_FLAG_CONTINUE
	ioctlNotifRecv         = 0xc0502100
	ioctlNotifSend         = 0xc0182101
	ioctlNotifIDValid      = 0x40082102

	bpfLdWAbs = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK   = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	sysPidfdGetfd   = 438
	sysPidfdSendSig = 424
)

// scopedKill is kill(pid, sig) as the kernel does it for the calling
// thread, past the relay's filter: Landlock scopes it to the thread's
// domain. The marker, kill's third argument, is the relay's secret
// (relay.marker, random): a command that guessed it would reach the
// kernel with a kill of its own domain's processes and of the
// supervisor's thread in its domain, which no command may signal.
func (r *relay) scopedKill(pid int, sig syscall.Signal) error {
	var marker uintptr
	if r != nil {
		marker = uintptr(r.marker)
	}
	if _, _, e := syscall.Syscall6(syscall.SYS_KILL, uintptr(pid), uintptr(sig), marker, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type sockFprog struct {
	n      uint16
	filter *sockFilter
}

// seccompNotif is struct seccomp_notif.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

// seccompResp is struct seccomp_notif_resp.
type seccompResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// relayFilter is the filter every command of a relaying supervisor runs
// under, for the supervisor self with the secret marker:
//
//   - kill (without the marker), rt_sigqueueinfo, pidfd_send_signal and
//     tkill notify the supervisor;
//   - tgkill and rt_tgsigqueueinfo (thread-directed: raise, pthread_kill,
//     the Go runtime) go on to the kernel, which scopes them to the
//     command's domain, unless their process is pid 1 or self: EPERM.
//     The supervisor's thread that forked the command is in its domain
//     (domain_linux.go), and no signal may reach it;
//   - a call made through another ABI (int 0x80 or x32 on x86_64,
//     AArch32 on arm64) fails with EPERM, as the sandbox's own filter
//     has it (package seccomp): its numbers are not this table's;
//   - every other call goes on to the kernel.
func relayFilter(self int, marker uint64) []sockFilter {
	const nrOff, archOff, arg0Off, arg2Off = 0, 4, 16, 16 + 2*8
	const (
		lNotify = iota + 1
		lDeny
		lAllow
		lKill
		lThread
		lMarkerHigh
	)
	var prog []sockFilter
	labels := map[int]int{}
	type fix struct{ at, yes, no int }
	var fixes []fix
	ins := func(code uint16, k uint32) { prog = append(prog, sockFilter{code: code, k: k}) }
	jump := func(code uint16, k uint32, yes, no int) { // yes, no: labels, 0 for the next instruction
		fixes = append(fixes, fix{len(prog), yes, no})
		ins(code, k)
	}
	label := func(l int) { labels[l] = len(prog) }
	ins(bpfLdWAbs, archOff)
	jump(bpfJeqK, uint32(auditArch), 0, lDeny)
	ins(bpfLdWAbs, nrOff)
	if x32Bit != 0 {
		jump(bpfJgeK, x32Bit, lDeny, 0)
	}
	jump(bpfJeqK, uint32(sysKill), lKill, 0)
	jump(bpfJeqK, uint32(sysRtSigqueueinfo), lNotify, 0)
	jump(bpfJeqK, sysPidfdSendSig, lNotify, 0)
	jump(bpfJeqK, uint32(sysTkill), lNotify, 0)
	jump(bpfJeqK, uint32(sysTgkill), lThread, 0)
	jump(bpfJeqK, uint32(sysRtTgsigqueueinfo), lThread, lAllow)
	label(lKill)
	ins(bpfLdWAbs, arg2Off) // little-endian: the low half first
	jump(bpfJeqK, uint32(marker), lMarkerHigh, lNotify)
	label(lMarkerHigh)
	ins(bpfLdWAbs, arg2Off+4)
	jump(bpfJeqK, uint32(marker>>32), lAllow, lNotify)
	label(lThread)
	ins(bpfLdWAbs, arg0Off) // a pid_t: the low half
	jump(bpfJeqK, 1, lDeny, 0)
	jump(bpfJeqK, uint32(self), lDeny, lAllow)
	label(lNotify)
	ins(bpfRetK, seccompRetUserNotif)
	label(lDeny)
	ins(bpfRetK, seccompRetErrno|uint32(syscall.EPERM))
	label(lAllow)
	ins(bpfRetK, seccompRetAllow)
	for _, f := range fixes {
		to := func(l int) uint8 {
			if l == 0 {
				return 0
			}
			return uint8(labels[l] - f.at - 1)
		}
		prog[f.at].jt, prog[f.at].jf = to(f.yes), to(f.no)
	}
	return prog
}

// relay answers the signal calls of the commands (see the top of this
// file).
type relay struct {
	// guard refuses the supervisor and pid 1 as targets; off only in a
	// test's control (--signals unguarded), to prove the tests see it.
	guard  bool
	self   int    // the supervisor's pid
	marker uint64 // the domains' own kills (scopedKill): random
	prog   []sockFilter

	once sync.Once
	ep   int
	err  error
}

func newRelay(guard bool) *relay {
	if sysKill < 0 {
		return nil // an architecture the filter does not know
	}
	r := &relay{guard: guard, self: os.Getpid(), ep: -1}
	if randomMarker(&r.marker) != nil {
		return nil
	}
	r.prog = relayFilter(r.self, r.marker)
	return r
}

// install puts the relay's filter on the calling thread (a domain's,
// locked) and returns its listener (close-on-exec), or -1 when the
// kernel refuses it (the command then runs as without the relay).
func (r *relay) install() int {
	prog := sockFprog{n: uint16(len(r.prog)), filter: &r.prog[0]}
	fd, _, e := syscall.RawSyscall(uintptr(sysSeccomp), seccompSetModeFilter, seccompFlagNewListener, uintptr(unsafe.Pointer(&prog)))
	if e != 0 {
		return -1
	}
	return int(fd)
}

// add makes the relay answer listener fd, starting the relay's thread
// with the first one. It reports false, having closed fd, when it cannot.
func (r *relay) add(fd int) bool {
	r.once.Do(func() {
		if r.ep, r.err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); r.err == nil {
			go r.serve()
		}
	})
	if r.err == nil {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if syscall.EpollCtl(r.ep, syscall.EPOLL_CTL_ADD, fd, &ev) == nil {
			return true
		}
	}
	syscall.Close(fd)
	return false
}

// serve answers notifications for ever. A listener whose filter no
// process holds any more (EPOLLHUP: its domain's thread and every
// process of its command are gone) is closed here, the only place that
// closes one, so no descriptor number is reused under it.
func (r *relay) serve() {
	var evs [16]syscall.EpollEvent
	for {
		n, err := syscall.EpollWait(r.ep, evs[:], -1)
		if err != nil {
			if err != syscall.EINTR {
				syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil) // not seen; do not spin
			}
			continue
		}
		for _, ev := range evs[:n] {
			fd := int(ev.Fd)
			switch {
			case ev.Events&syscall.EPOLLIN != 0:
				r.answer(fd)
			case ev.Events&(syscall.EPOLLHUP|syscall.EPOLLERR) != 0:
				syscall.EpollCtl(r.ep, syscall.EPOLL_CTL_DEL, fd, nil)
				syscall.Close(fd)
			}
		}
	}
}

// randomMarker fills m from the kernel's random pool (getrandom).
func randomMarker(m *uint64) error {
	for {
		n, _, e := syscall.Syscall(uintptr(sysGetrandom), uintptr(unsafe.Pointer(m)), 8, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		if n == 8 && *m != 0 {
			return nil
		}
	}
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) syscall.Errno {
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	return e
}

// answer receives one notification of listener fd and answers it. A
// notification whose caller went away meanwhile (killed) is gone
// (ENOENT); the receive never blocks, the listener being readable and
// this its only reader.
func (r *relay) answer(fd int) {
	var n seccompNotif
	if ioctl(fd, ioctlNotifRecv, unsafe.Pointer(&n)) != 0 {
		return
	}
	c := call{r: r, fd: fd, n: &n}
	resp := seccompResp{id: n.id}
	switch e, cont := c.decide(); {
	case cont:
		resp.flags = notifFlagContinue
	case e != 0:
		resp.error = -int32(e)
	}
	ioctl(fd, ioctlNotifSend, unsafe.Pointer(&resp))
}

// call is one notification being answered.
type call struct {
	r      *relay
	fd     int
	n      *seccompNotif
	caller int // the calling process (thread group)
}

// valid reports whether the caller still waits for this notification:
// what was read of it meanwhile was its own.
func (c *call) valid() bool {
	id := c.n.id
	return ioctl(c.fd, ioctlNotifIDValid, unsafe.Pointer(&id)) == 0
}

// decide carries out the call, returning its errno, or cont: let the
// kernel carry it out for the caller. The kernel gets only what cannot
// reach a thread of the supervisor: the caller's own process, a call that
// fails anyway, a pid namespace below this one.
func (c *call) decide() (e syscall.Errno, cont bool) {
	st, ok := readStatus(int(c.n.pid))
	if !ok {
		return syscall.ESRCH, false // the caller is gone
	}
	if st.nested {
		// In a pid namespace of its own, which holds only its
		// descendants: the pids it names are not this namespace's.
		return 0, true
	}
	c.caller = st.tgid
	sig := int(int32(c.n.args[1]))
	if sig < 0 || sig > 64 {
		return syscall.EINVAL, false
	}
	switch c.n.nr {
	case sysKill:
		switch pid := int(int32(c.n.args[0])); {
		case pid == c.caller:
			return 0, true
		case pid > 0:
			return c.process(pid, sig, nil), false
		case pid == 0:
			pgid, err := syscall.Getpgid(c.caller)
			if err != nil {
				return syscall.ESRCH, false
			}
			return c.group(pgid, sig), false
		case pid == -1:
			return c.everyone(sig), false
		case pid == -1<<31:
			return syscall.ESRCH, false
		default:
			return c.group(-pid, sig), false
		}
	case sysRtSigqueueinfo:
		pid := int(int32(c.n.args[0]))
		if pid <= 0 {
			return syscall.ESRCH, false
		}
		info, ok := c.siginfo(c.n.args[2], sig)
		if !ok {
			return syscall.EFAULT, false
		}
		return c.process(pid, sig, info), false
	case sysTkill:
		// Thread-directed: the kernel scopes it to the caller's domain,
		// where the only thread of the supervisor is the one that forked
		// the command.
		tid := int(int32(c.n.args[0]))
		t, ok := readStatus(tid)
		switch {
		case tid <= 0 || !ok:
			return syscall.ESRCH, false
		case c.r.protected(t.tgid):
			return syscall.EPERM, false
		}
		return 0, true
	case sysPidfdSendSig:
		return c.pidfd(sig), false
	}
	return syscall.ENOSYS, false
}

// siginfo reads the caller's siginfo_t at addr, its signal number set
// to sig, as pidfd_send_signal wants.
func (c *call) siginfo(addr uint64, sig int) (*[128]byte, bool) {
	var info [128]byte
	local := syscall.Iovec{Base: &info[0], Len: uint64(len(info))}
	remote := struct{ base, n uint64 }{addr, uint64(len(info))}
	got, _, e := syscall.Syscall6(uintptr(sysProcessVMReadv), uintptr(c.caller), uintptr(unsafe.Pointer(&local)), 1,
		uintptr(unsafe.Pointer(&remote)), 1, 0)
	if e != 0 || got != uintptr(len(info)) {
		return nil, false
	}
	*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
	return &info, true
}

// protected reports whether the process tgid is out of every command's
// reach: the supervisor, and pid 1 (the supervisor or the network
// bridge).
func (r *relay) protected(tgid int) bool { return r.guard && (tgid == 1 || tgid == r.self) }

// process signals the process that pid names (a thread's id names its
// process, as for kill(2)).
func (c *call) process(pid, sig int, info *[128]byte) syscall.Errno {
	st, ok := readStatus(pid)
	if !ok {
		return syscall.ESRCH
	}
	if c.r.protected(st.tgid) {
		return syscall.EPERM
	}
	// A pidfd opens thread group leaders only: never one of the
	// supervisor's threads, whatever pid now names.
	pfd, err := pidfdOpen(st.tgid)
	if err != nil {
		return syscall.ESRCH
	}
	defer syscall.Close(pfd)
	if !c.valid() {
		return syscall.ESRCH
	}
	return pidfdSend(pfd, sig, info, 0)
}

// group signals process group pgid. The kernel does it at once (no
// process forked meanwhile escapes) unless the group holds a protected
// process, which only the supervisor's or pid 1's group can: then each
// other member is signalled on its own.
func (c *call) group(pgid, sig int) syscall.Errno {
	if !c.valid() {
		return syscall.ESRCH
	}
	if c.r.guard {
		g1, _ := syscall.Getpgid(1)
		gs, _ := syscall.Getpgid(c.r.self)
		if pgid == g1 || pgid == gs {
			return c.each(sig, func(pid int, st status) bool { return st.pgrp == pgid })
		}
	}
	if err := syscall.Kill(-pgid, syscall.Signal(sig)); err != nil {
		return err.(syscall.Errno)
	}
	return 0
}

// everyone is kill(-1): every process but the caller's own and the
// protected ones, as on a machine, where init is spared.
func (c *call) everyone(sig int) syscall.Errno {
	if !c.valid() {
		return syscall.ESRCH
	}
	return c.each(sig, func(pid int, st status) bool { return pid != c.caller })
}

// each signals every unprotected process that match selects, and
// answers as the kernel's group signals do: 0 when one got it, else the
// last error, ESRCH when none matched.
func (c *call) each(sig int, match func(pid int, st status) bool) syscall.Errno {
	f, err := os.Open("/proc")
	if err != nil {
		return syscall.ESRCH
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	sent, last := false, syscall.ESRCH
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || c.r.protected(pid) {
			continue
		}
		st, ok := readStatus(pid)
		if !ok || st.tgid != pid || !match(pid, st) {
			continue
		}
		pfd, err := pidfdOpen(pid)
		if err != nil {
			continue
		}
		if e := pidfdSend(pfd, sig, nil, 0); e == 0 {
			sent = true
		} else if e != syscall.EPERM || last == syscall.ESRCH {
			last = e
		}
		syscall.Close(pfd)
	}
	if sent {
		return 0
	}
	return last
}

// pidfd_send_signal's flags (linux/pidfd.h).
const (
	pidfdSignalThread       = 1 << 0
	pidfdSignalThreadGroup  = 1 << 1
	pidfdSignalProcessGroup = 1 << 2
)

// pidfd is pidfd_send_signal(pidfd, sig, info, flags): the caller's
// pidfd, taken (pidfd_getfd), names the target, which gets the signal
// through that same pidfd. A pidfd the relay cannot take (a caller that
// made itself not dumpable) is refused: it might name the supervisor's
// thread in the caller's domain.
func (c *call) pidfd(sig int) syscall.Errno {
	flags := c.n.args[3]
	if flags&^(pidfdSignalThread|pidfdSignalThreadGroup|pidfdSignalProcessGroup) != 0 {
		return syscall.EINVAL
	}
	cfd, err := pidfdOpen(c.caller)
	if err != nil {
		return syscall.ESRCH
	}
	fd, _, e := syscall.Syscall(sysPidfdGetfd, uintptr(cfd), uintptr(int32(c.n.args[0])), 0)
	syscall.Close(cfd)
	if e == syscall.EBADF {
		return syscall.EBADF
	}
	if e != 0 {
		return syscall.EPERM
	}
	defer syscall.Close(int(fd))
	target, _, ok := pidfdInfo(int(fd))
	switch {
	case !ok:
		return syscall.EBADF // not a pidfd
	case target < 0:
		return syscall.ESRCH // it exited
	case target == 0:
		return syscall.EPERM // of another pid namespace: none below this one may be signalled from here
	}
	st, ok := readStatus(target)
	switch {
	case !ok:
		return syscall.ESRCH
	case c.r.protected(st.tgid):
		return syscall.EPERM
	}
	var info *[128]byte
	if c.n.args[2] != 0 {
		if info, ok = c.siginfo(c.n.args[2], sig); !ok {
			return syscall.EFAULT
		}
	}
	if flags&pidfdSignalProcessGroup != 0 {
		return c.group(st.pgrp, sig)
	}
	if !c.valid() {
		return syscall.ESRCH
	}
	return pidfdSend(int(fd), sig, info, uint(flags))
}

func pidfdSend(pfd, sig int, info *[128]byte, flags uint) syscall.Errno {
	_, _, e := syscall.Syscall6(sysPidfdSendSig, uintptr(pfd), uintptr(sig), uintptr(unsafe.Pointer(info)), uintptr(flags), 0, 0)
	return e
}

// pidfdInfo reads a pidfd's process (-1: exited, 0: not in this pid
// namespace) and flags from its fdinfo; ok is false for a descriptor
// that is no pidfd.
func pidfdInfo(fd int) (pid int, flags uint64, ok bool) {
	b, err := readSmall("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, 0, false
	}
	return parsePidfdInfo(b)
}

// parsePidfdInfo parses the fdinfo of a descriptor: its "Pid:" (a
// pidfd's) and its "flags:" (octal).
func parsePidfdInfo(b []byte) (pid int, flags uint64, ok bool) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "Pid":
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, 0, false
			}
			pid, ok = n, true
		case "flags":
			flags, _ = strconv.ParseUint(v, 8, 64)
		}
	}
	return pid, flags, ok
}

// status is what the relay reads of a process in /proc/PID/status.
type status struct {
	tgid, pgrp int
	nested     bool // in a pid namespace below this one
}

// readStatus reads the status of pid (a process or a thread); ok is
// false when it is gone.
func readStatus(pid int) (st status, ok bool) {
	b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return st, false
	}
	if st, ok = parseStatus(b); ok {
		st.pgrp, _ = syscall.Getpgid(st.tgid)
	}
	return st, ok
}

// parseStatus parses /proc/PID/status: its "Tgid:" (ok: one above 0)
// and whether its "NSpid:" names more than one namespace.
func parseStatus(b []byte) (st status, ok bool) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Tgid":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return status{}, false
			}
			st.tgid, ok = n, true
		case "NSpid":
			st.nested = len(strings.Fields(v)) > 1
		}
	}
	return st, ok && st.tgid > 0
}

// readSmall reads at most 8 KiB of a /proc file.
func readSmall(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	b := make([]byte, 8<<10)
	n := 0
	for n < len(b) {
		m, err := syscall.Read(fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return b[:n], nil
}
