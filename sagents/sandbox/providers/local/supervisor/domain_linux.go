package supervisor

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// Each command runs in a Landlock domain of its own (Linux 6.12+,
// Landlock ABI 6: LANDLOCK_SCOPE_SIGNAL), below the supervisor, which is
// in none. A process may then signal only processes of its own domain
// (or of domains nested in it), and ptrace only those: no command can
// stop, kill or trace the supervisor, the network bridge, another
// command or a background task, or read their descriptors and memory
// through /proc or pidfd_getfd; its own processes (gdb, strace, kill of
// its children) it still can.
//
// A domain belongs to the credentials of the thread that enters it, and
// a process forked from that thread is born in it. So the supervisor
// forks each command from a thread of its own, locked to a goroutine,
// that entered the command's new domain first (landlock_restrict_self
// applies to the calling thread only) and stays in it until the
// command's end: signal scoping then makes kill(-1, sig) from that
// thread reach exactly the command's processes, wherever they moved
// (setsid, setpgid, double forks: a domain cannot be left). A timeout,
// a cancel or a kill ends the whole command that way, not only its
// process group. The thread then ends with its goroutine (a locked
// goroutine that returns takes its thread down), so no thread of the
// supervisor stays in a domain.
//
// The ruleset scopes signals and handles no file system or network
// access: no other right is restricted (a ruleset handling any file
// system right would deny renames across directories, for one). Without
// ABI 6 (an older kernel, or gVisor, which has no Landlock) there is no
// domain: the supervisor is still out of reach (pid 1 of the sandbox,
// not dumpable), and a command's end signals its process group.

// Landlock's system calls and flags (linux/landlock.h), the same numbers
// on every architecture.
const (
	sysLandlockCreateRuleset = 444
	sysLandlockRestrictSelf  = 446
	landlockCreateVersion    = 1      // LANDLOCK_CREATE_RULESET_VERSION
	landlockScopeSignal      = 1 << 1 // LANDLOCK_SCOPE_SIGNAL
	prSetNoNewPrivs          = 38     // PR_SET_NO_NEW_PRIVS
)

// LandlockSignalABI is the first Landlock ABI that scopes signals.
const LandlockSignalABI = 6

// LandlockABI is the Landlock ABI version of the running kernel, 0
// without Landlock.
func LandlockABI() int {
	v, _, e := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, landlockCreateVersion)
	if e != 0 {
		return 0
	}
	return int(v)
}

// rulesetAttr is struct landlock_ruleset_attr up to its scoped field
// (the kernel takes a shorter struct from an older caller).
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// newRuleset returns the ruleset every command's domain is made of
// (close-on-exec), or -1 when the kernel cannot scope signals.
func newRuleset() int {
	if LandlockABI() < LandlockSignalABI {
		return -1
	}
	a := rulesetAttr{scoped: landlockScopeSignal}
	fd, _, e := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0)
	if e != 0 {
		return -1
	}
	return int(fd)
}

// domain is one command's Landlock domain: a thread in it, which runs
// the functions sent to it.
type domain struct {
	work chan func()
	r    *relay // nil: no relay (its scopedKill is a plain kill then)
}

// enterDomain starts a thread in a new domain of ruleset rules, under
// the relay's filter when there is a relay (signals_linux.go).
func enterDomain(rules int, r *relay) (*domain, error) {
	d := &domain{work: make(chan func()), r: r}
	entered := make(chan error, 1)
	listener := -1
	OffMainThread(func() {
		// No new privileges is a thread's too; bwrap set it already.
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
			entered <- e
			return
		}
		if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelf, uintptr(rules), 0, 0); e != 0 {
			entered <- e
			return // the thread ends: it may be restricted
		}
		if r != nil {
			listener = r.install()
		}
		entered <- nil
		for f := range d.work {
			f()
		}
	})
	if err := <-entered; err != nil {
		return nil, &os.SyscallError{Syscall: "landlock_restrict_self", Err: err}
	}
	if listener >= 0 {
		r.add(listener)
	}
	return d, nil
}

// takeDomain returns a new domain for a command: the one made ahead of
// it when there is one (a thread's start and the domain's system calls
// are then off the command's way), else one made now; either way the
// next one is made in the background.
func (s *server) takeDomain() (*domain, error) {
	defer func() { go s.refill() }()
	select {
	case d := <-s.spare:
		return d, nil
	default:
		return enterDomain(s.rules, s.relay)
	}
}

// refill makes the next command's domain ahead, unless one is waiting.
func (s *server) refill() {
	if len(s.spare) > 0 {
		return
	}
	d, err := enterDomain(s.rules, s.relay)
	if err != nil {
		return
	}
	select {
	case s.spare <- d:
	default: // another refill was faster
		d.leave()
	}
}

// run runs f on the domain's thread and waits for it.
func (d *domain) run(f func()) {
	done := make(chan struct{})
	d.work <- func() { f(); close(done) }
	<-done
}

// leave ends the domain's thread.
func (d *domain) leave() { close(d.work) }

// signal sends sig to every process of the domain (kill(-1) reaches no
// other: signals are scoped; nor this process or pid 1). Its kills pass
// the relay's filter (scopedKill): the kernel scopes them.
func (d *domain) signal(sig syscall.Signal) { d.run(func() { d.r.scopedKill(-1, sig) }) }

// kill sends SIGKILL to the domain's processes until none is left alive,
// for at most about two seconds (a fork bomb's children may be born
// between two rounds). The dead wait for their parents or, as orphans,
// for the supervisor's reaper.
func (d *domain) kill() {
	d.run(func() {
		for range 1000 {
			d.r.scopedKill(-1, syscall.SIGKILL)
			if !d.anyAlive() {
				return
			}
			syscall.Nanosleep(&syscall.Timespec{Nsec: 2e6}, nil)
		}
	})
}

// anyAlive reports, on the domain's thread, whether a process of the
// domain is alive: one this thread may signal (kill 0 succeeds only in
// the domain, signals being scoped) that is not a zombie, other than the
// supervisor itself.
func (d *domain) anyAlive() bool {
	f, err := os.Open("/proc")
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	self := os.Getpid()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self || d.r.scopedKill(pid, 0) != nil {
			continue
		}
		if !zombie(pid) {
			return true
		}
	}
	return false
}

// zombie reports whether pid has exited and waits to be reaped (or is
// gone).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
		}
	}
	return false
}

// OffMainThread runs f in a new goroutine locked to an OS thread that is
// not the main one, and ends that thread when f returns (a goroutine
// locked to the main thread when it returns wedges it instead). A
// thread whose credentials f changes (a Landlock domain here, a cgroup
// in local mode's cgroup thread) so never outlives f, and the process's
// leader never has them.
func OffMainThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() != syscall.Getpid() {
			f()
			return
		}
		locked := make(chan struct{})
		go func() { // not on this thread: it is locked to this goroutine
			runtime.LockOSThread()
			close(locked)
			f()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}
