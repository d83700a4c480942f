package supervisor

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// reaper collects every child of the supervisor: the commands it started
// and, as the session's child subreaper, every orphan of their trees (a
// background job whose shell ended, the survivors of a killed fork
// bomb). Unreaped, each exited orphan would stay a zombie for the life
// of the session and count against its pids limit.
//
// One goroutine waits for any child (waitid with WNOWAIT, so nothing is
// reaped before the lock is held), then reaps all exited children under
// mu and hands the status of a started command to its waiter. exec holds
// mu from fork to registration, so a command that ends at once is never
// reaped before its waiter exists, and its pid stays valid (no reuse)
// while the host is sent a pidfd of it.
type reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus
	kick    chan struct{} // a child was started: there is something to wait for
	once    sync.Once
}

// waitid(2) and wait4(2) arguments the syscall package does not name.
const (
	pAll    = 0          // P_ALL
	wExited = 4          // WEXITED
	wNowait = 0x1000000  // WNOWAIT
	wAll    = 0x40000000 // __WALL: children of any exit signal
)

// track registers pid, just started with mu held, and returns the channel
// its wait status will arrive on. The first call starts the reaping
// goroutine: a supervisor that never started a command (Main called in
// a test) reaps nothing of its process's.
func (r *reaper) track(pid int) <-chan syscall.WaitStatus {
	r.once.Do(func() {
		r.kick = make(chan struct{}, 1)
		go r.run()
	})
	ch := make(chan syscall.WaitStatus, 1)
	if r.waiting == nil {
		r.waiting = map[int]chan syscall.WaitStatus{}
	}
	r.waiting[pid] = ch
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return ch
}

func (r *reaper) run() {
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info)), wExited|wNowait|wAll, 0, 0)
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.ECHILD: // no child at all: wait for the next command
			<-r.kick
			continue
		default: // not seen; do not spin
			syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
			continue
		}
		r.mu.Lock()
		handed := r.reapExited()
		r.mu.Unlock()
		if handed {
			// Let the command's waiter send its "exited" now: with one P
			// (GOMAXPROCS=1) and this goroutine back in waitid, it would
			// wait for the runtime's sysmon to take the P back (up to
			// milliseconds).
			runtime.Gosched()
		}
	}
}

// reapExited reaps every exited child, with mu held, and reports
// whether it handed a started command's status to its waiter.
func (r *reaper) reapExited() (handed bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|wAll, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return handed
		}
		if ch, ok := r.waiting[pid]; ok {
			delete(r.waiting, pid)
			ch <- ws
			handed = true
		}
	}
}

// signal signals one running command's process group; an id that is not
// running is ignored (the command ended meanwhile).
//
// SIGTERM and SIGKILL end the command: its whole process group, not only
// the processes there at the moment of the signal. A process forked while
// the group was signalled can miss the signal (a fork bomb's survivors
// go on forking), and one that ignores SIGTERM outlives its leader; so
// once the leader of a command told to end has exited, SIGKILL is sent
// to what is left of its group until it is empty (killGroup, in exec's
// wait).
//
// A command in a Landlock domain (domain_linux.go) or with a group tag
// (tag_linux.go) told to end gets the signal in every process of its
// set instead, wherever it moved (another session or process group);
// once its leader exited, what is left of its set is killed. Other
// signals go to its process group.
func (s *server) signal(req Request) {
	if req.Sig <= 0 || req.Sig >= 65 {
		return
	}
	sig := syscall.Signal(req.Sig)
	end := sig == syscall.SIGTERM || sig == syscall.SIGKILL
	s.mu.Lock()
	pgid, ok := s.pgid[req.ID]
	set := s.set[req.ID]
	if ok && end {
		s.ending[req.ID] = true
	}
	s.mu.Unlock()
	switch {
	case !ok:
	case end && set != nil:
		set.signal(sig)
		syscall.Kill(-pgid, sig) // and the group: what was forked meanwhile
	default:
		syscall.Kill(-pgid, sig)
	}
}

// killGroup sends SIGKILL to process group pgid until no process is left
// in it (ESRCH), for at most about two seconds. The group's dead wait to
// be reaped by their parents or, as orphans, by the reaper.
func killGroup(pgid int) {
	for range 1000 {
		if syscall.Kill(-pgid, syscall.SIGKILL) == syscall.ESRCH {
			return
		}
		syscall.Nanosleep(&syscall.Timespec{Nsec: 2e6}, nil)
	}
}

func (s *server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, pg := range s.pgid {
		syscall.Kill(-pg, syscall.SIGKILL)
		if set := s.set[id]; set != nil {
			set.signal(syscall.SIGKILL)
		}
	}
}
