//go:build linux

package supervisor

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// The supervisor imports nothing but a few early packages of the
// standard library (no os/exec, no golang.org/x/sys): a program runs the
// init functions of its packages in import-path order as their imports
// become ready, so with few and early imports this package's init takes
// over before most of the linking program's packages initialise (faster
// start, fewer dirty pages per session sandbox).

// Name is the executable name (argv[0]'s base) that makes a program
// linking this package serve as the supervisor.
const Name = "sage-supervisor"

func init() {
	if len(os.Args) > 0 && os.Args[0][strings.LastIndexByte(os.Args[0], '/')+1:] == Name {
		os.Exit(Main(os.Args[1:]))
	}
}

// Protocol is the version of the control protocol (Request, Reply and
// what they mean), sent in every "pong". A host runs a separate
// supervisor program (cmd/sage-supervisor) only once its pong carries the
// host's own Protocol: one built from other sources, stale or not a
// supervisor at all, is refused. Raise it with every change a supervisor
// of the previous version would misread.
const Protocol = 6

// served is the Protocol this build answers with, as a string constant
// so that a test can build a stale supervisor (-ldflags -X).
var served = "6"

// Limits of the control channel: a message and the descriptors it carries.
const (
	MaxMessage = 256 << 10
	MaxFiles   = 3
	MaxArgs    = 4096
)

// Request is one message from the host, encoded by MarshalBinary.
type Request struct {
	Op   string // "exec", "signal", "release" or "ping"
	ID   uint64
	Argv []string
	Env  []string
	Dir  string
	Sig  int
	// Gate holds an exec'ed command before its first instruction until a
	// "release" request: the "started" reply then carries a pidfd of it,
	// for the host to put it in its own cgroup first.
	Gate bool
	// CPUSeconds, for a gated command, is its RLIMIT_CPU (soft; hard one
	// second above), set before it is released.
	CPUSeconds int
	// Pidfd asks for a pidfd of the command with the "started" reply
	// (always sent for a gated command): the host learns its host pid.
	Pidfd bool
	// GroupDies kills what is left of the command's process group when
	// its leader exits, as a per-command cgroup does where there is one.
	GroupDies bool
	// Quiet leaves out the "started" reply of a command that is neither
	// gated nor asked for a pidfd: the host waits for its "exited" only,
	// and is not woken while the command runs.
	Quiet bool
}

// Reply is one message to the host, encoded by MarshalBinary.
type Reply struct {
	Op string // "started", "exited", "error" or "pong"
	ID uint64
	// Protocol, in a "pong", is the supervisor's Protocol.
	Protocol int
	Pid      int
	Exit     int
	Signal   int
	Err      string
	// HostPid is filled in by the host from the pidfd a gated "started"
	// carries; never sent.
	HostPid int
}

// OOMScoreAdj is the oom_score_adj of every command.
const OOMScoreAdj = "500"

// ExitFailed is the supervisor's own exit status when it cannot serve.
const ExitFailed = 124

type server struct {
	fd   int
	wmu  sync.Mutex
	mu   sync.Mutex
	pgid map[uint64]int      // running commands: id -> process group
	gate map[uint64]*os.File // held commands: id -> the pipe that releases them
	reap reaper
	// ending marks the running commands told to end (SIGTERM or SIGKILL)
	// or asked so (GroupDies): when their leader exits, the rest of their
	// group (their domain, when they have one) is killed.
	ending map[uint64]bool
	// rules is the Landlock ruleset of the commands' domains, -1 for
	// none (domain_linux.go); tags, when there is none, tags each
	// command's processes with a group of its own (tag_linux.go); set
	// holds the running commands' domains or tags.
	rules int
	spare chan *domain // a domain made ahead for the next command (takeDomain)
	// relay, with domains, answers the commands' signal calls
	// (signals_linux.go); nil without.
	relay *relay
	tags  bool
	set   map[uint64]commandSet
	// nproc, when set, is every command's RLIMIT_NPROC: the host gave
	// the supervisor itself more (--nproc), for the threads it makes.
	// noPtrace: a command cannot be held at its exec (ptrace refused).
	nproc    int
	noPtrace bool
}

// commandSet is every process of one command, wherever it moved: its
// Landlock domain or its group tag.
type commandSet interface {
	signal(syscall.Signal) // every process of the set
	kill()                 // SIGKILL until none is left alive
	leave()                // the command ended: release the set
}

// Main serves the control socket given as --fd N and returns the exit
// status once the host closed it. --umask OOO (octal) sets the file mode
// creation mask every command inherits: set here, the sandbox needs no
// shell in front of the supervisor to set it. --protocol V is the
// host's Protocol: a supervisor of another version refuses to serve
// (and one older than the flag fails on it), so a request the host sends
// before the first pong never reaches a supervisor that would misread it.
// --domains on|off puts each command in a Landlock domain of its own
// where the kernel scopes signals (on, the default; domain_linux.go);
// --group-tags on|off, where there are no domains (gVisor), tags each
// command's processes with a group of its own (off, the default;
// tag_linux.go). --signals on|off, with domains, relays the commands'
// signals to processes of other domains, the supervisor's and pid 1's
// refused (on, the default; signals_linux.go; "unguarded" relays those
// too, for a test's control only). --nproc N sets every command's RLIMIT_NPROC to N (the
// host gives the supervisor more, for its threads).
func Main(args []string) int {
	const usage = Name + ": usage: " + Name + " --fd N [--umask OOO] [--protocol V] [--domains on|off] [--group-tags on|off] [--signals on|off] [--nproc N]\n"
	if len(args) < 2 || len(args)%2 != 0 || args[0] != "--fd" {
		os.Stderr.WriteString(usage)
		return ExitFailed
	}
	fd, err := strconv.Atoi(args[1])
	if err == nil && fd == 0 {
		fd, err = stdioChannel()
	}
	if err != nil || fd < 3 {
		os.Stderr.WriteString(Name + ": --fd wants a descriptor above 2, or 0 for a channel on stdin and stdout\n")
		return ExitFailed
	}
	domains, tags, nproc, signals := true, false, 0, "on"
	for i := 2; i < len(args); i += 2 {
		switch v := args[i+1]; args[i] {
		case "--domains", "--group-tags":
			if v != "on" && v != "off" {
				os.Stderr.WriteString(Name + ": " + args[i] + " wants on or off, got " + strconv.Quote(v) + "\n")
				return ExitFailed
			}
			if args[i] == "--domains" {
				domains = v == "on"
			} else {
				tags = v == "on"
			}
		case "--signals":
			if v != "on" && v != "off" && v != "unguarded" {
				os.Stderr.WriteString(Name + ": --signals wants on or off, got " + strconv.Quote(v) + "\n")
				return ExitFailed
			}
			signals = v
		case "--umask":
			mask, err := strconv.ParseUint(v, 8, 32)
			if err != nil || mask > 0o777 {
				os.Stderr.WriteString(Name + ": --umask wants an octal mode from 000 to 777, got " + strconv.Quote(v) + "\n")
				return ExitFailed
			}
			syscall.Umask(int(mask))
		case "--nproc":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				os.Stderr.WriteString(Name + ": --nproc wants a count of processes, got " + strconv.Quote(v) + "\n")
				return ExitFailed
			}
			nproc = n
		case "--protocol":
			if v != served {
				os.Stderr.WriteString(Name + ": the host speaks protocol " + v + ", this build " + served +
					"; fix: rebuild " + Name + " from the host's sources (make build)\n")
				return ExitFailed
			}
		default:
			os.Stderr.WriteString(usage)
			return ExitFailed
		}
	}
	// Nothing started here may inherit the channel, and no command may
	// open it through /proc or ptrace this process.
	syscall.CloseOnExec(fd)
	if err := prctl(prSetDumpable, 0); err != nil {
		os.Stderr.WriteString(Name + ": prctl: " + err.Error() + "\n")
		return ExitFailed
	}
	prctl(prSetChildSubreaper, 1)
	s := &server{fd: fd, pgid: map[uint64]int{}, gate: map[uint64]*os.File{}, ending: map[uint64]bool{},
		rules: -1, set: map[uint64]commandSet{}, nproc: nproc}
	if domains {
		s.rules = newRuleset()
	}
	if s.rules >= 0 && signals != "off" {
		s.relay = newRelay(signals == "on")
	}
	if s.rules >= 0 {
		s.spare = make(chan *domain, 1)
		go s.refill() // ready by the first command, most often
	}
	if tags && s.rules < 0 && !keepCapsToSelf() {
		os.Stderr.WriteString(Name + ": --group-tags on: no CAP_SETGID to tag the commands' processes\n")
		return ExitFailed
	}
	s.tags = tags && s.rules < 0
	s.serve()
	s.killAll()
	return 0
}

// stdioChannel takes the control channel from stdin (--fd 0), where
// runsc restore can hand a sandbox's channel back (it restores stdio, not
// descriptors donated with --pass-fd): it is moved above 2 and /dev/null
// put on stdin. (Under gVisor, stdout must not be the same socket: each
// stdio descriptor is a file of its own there, and closing one shuts the
// host socket down for both.)
func stdioChannel() (int, error) {
	fd, err := fcntlDup(0)
	if err != nil {
		return -1, err
	}
	null, err := syscall.Open(os.DevNull, syscall.O_RDWR, 0)
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	err = syscall.Dup3(null, 0, 0)
	syscall.Close(null)
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// fcntlDup duplicates fd to the lowest free descriptor above 2.
func fcntlDup(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 3)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func (s *server) serve() {
	buf := make([]byte, MaxMessage)
	oob := make([]byte, syscall.CmsgSpace(4*MaxFiles))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(s.fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		files := parseFiles(oob[:oobn])
		var req Request
		if err := req.UnmarshalBinary(buf[:n]); err != nil {
			closeAll(files)
			s.reply(Reply{Op: "error", Err: "bad request: " + err.Error()})
			continue
		}
		switch req.Op {
		case "exec":
			s.exec(req, files)
		case "signal":
			closeAll(files)
			s.signal(req)
		case "release":
			closeAll(files)
			s.release(req.ID)
		case "ping": // the host's check that the supervisor serves
			closeAll(files)
			v, _ := strconv.Atoi(served)
			s.reply(Reply{Op: "pong", ID: req.ID, Protocol: v})
		default:
			closeAll(files)
			s.reply(Reply{Op: "error", ID: req.ID, Err: "unknown op " + strconv.Quote(req.Op)})
		}
	}
}

func parseFiles(oob []byte) []*os.File {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var out []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			out = append(out, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return out
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (s *server) reply(r Reply, fds ...int) {
	b, _ := r.MarshalBinary()
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	syscall.Sendmsg(s.fd, b, oob, nil, 0)
}

// gateScript holds the command until the gate pipe (fd 3) says go.
const gateScript = `read -r _ <&3; exec 3<&-; exec "$@"`

func (s *server) release(id uint64) {
	s.mu.Lock()
	w := s.gate[id]
	delete(s.gate, id)
	s.mu.Unlock()
	if w != nil {
		w.Write([]byte("\n"))
		w.Close()
	}
}

func (s *server) exec(req Request, files []*os.File) {
	defer closeAll(files)
	if len(files) != 3 || len(req.Argv) == 0 || len(req.Argv) > MaxArgs {
		s.reply(Reply{Op: "error", ID: req.ID, Err: "exec wants argv and 3 descriptors"})
		return
	}
	argv := req.Argv
	var gateR, gateW *os.File
	if req.Gate {
		var err error
		if gateR, gateW, err = os.Pipe(); err != nil {
			s.reply(Reply{Op: "error", ID: req.ID, Err: "gate: " + err.Error()})
			return
		}
		defer gateR.Close()
		argv = append([]string{"/bin/sh", "-c", gateScript, "sh"}, argv...)
	}
	env := req.Env
	if env == nil {
		env = os.Environ()
	}
	// syscall.ForkExec, not os.StartProcess: the first os.StartProcess of
	// a program probes pidfd support by forking a throwaway child, one
	// process more on the way of a session's first command.
	attr := &syscall.ProcAttr{Dir: req.Dir, Env: env, Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys: &syscall.SysProcAttr{Setpgid: true}}
	if gateR != nil {
		attr.Files = append(attr.Files, gateR.Fd())
	}
	path, err := lookPath(argv[0], req.Env)
	var d *domain
	var set commandSet
	switch {
	case err != nil:
	case s.rules >= 0:
		if d, err = s.takeDomain(); err == nil {
			set = d
		}
	case s.tags:
		g := tagOf(req.ID)
		attr.Sys.Credential = g.credential()
		set = g
	}
	pid, pfd := 0, -1
	var pfdErr error
	var done <-chan syscall.WaitStatus
	fork := func() {
		// From fork to registration with the reaper the command cannot be
		// reaped: its pid names it while its limits are set and a pidfd is
		// taken, even if it ends at once.
		s.reap.mu.Lock()
		defer s.reap.mu.Unlock()
		// With a pids limit of the commands' own below the supervisor's, a
		// command forked from a domain's thread (it holds the thread: the
		// Ptrace of SysProcAttr needs that) stops at its exec, before its
		// first instruction, to get it (releaseAtExec); where ptrace is
		// refused (local.seccomp.deny: [ptrace]), it gets it just after.
		attr.Sys.Ptrace = d != nil && s.nproc > 0 && !s.noPtrace
		pid, err = syscall.ForkExec(path, argv, attr)
		if err != nil && attr.Sys.Ptrace {
			s.noPtrace = true // refused: not tried again
			attr.Sys.Ptrace = false
			pid, err = syscall.ForkExec(path, argv, attr)
		}
		if err != nil {
			err = &os.PathError{Op: "fork/exec", Path: path, Err: err}
			return
		}
		if s.nproc > 0 {
			n := uint64(s.nproc)
			prlimit(pid, rlimitNproc, &syscall.Rlimit{Cur: n, Max: n})
			if attr.Sys.Ptrace {
				releaseAtExec(pid)
			}
		}
		// Under memory pressure the session's commands go first, not the
		// supervisor (raising a score needs no privilege; children inherit it).
		os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(OOMScoreAdj), 0)
		if gateW != nil && req.CPUSeconds > 0 {
			n := uint64(req.CPUSeconds)
			prlimit(pid, syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: n, Max: n + 1})
		}
		if gateW != nil || req.Pidfd {
			pfd, pfdErr = pidfdOpen(pid)
		}
		done = s.reap.track(pid)
	}
	switch {
	case err != nil:
	case d != nil: // born in its domain: forked from the domain's thread
		d.run(fork)
	default:
		fork()
	}
	if err != nil && set != nil {
		set.leave()
	}
	if err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		if gateW != nil {
			gateW.Close()
		}
		files[2].WriteString(req.Argv[0] + ": " + err.Error() + "\n")
		s.reply(Reply{Op: "exited", ID: req.ID, Exit: code})
		return
	}
	s.mu.Lock()
	s.pgid[req.ID] = pid
	if set != nil {
		s.set[req.ID] = set
	}
	if req.GroupDies {
		s.ending[req.ID] = true
	}
	if gateW != nil {
		s.gate[req.ID] = gateW
	}
	s.mu.Unlock()
	switch {
	case pfdErr != nil:
		s.reply(Reply{Op: "started", ID: req.ID, Pid: pid, Err: "pidfd: " + pfdErr.Error()})
	case pfd >= 0:
		s.reply(Reply{Op: "started", ID: req.ID, Pid: pid}, pfd)
		syscall.Close(pfd)
	case !req.Quiet:
		s.reply(Reply{Op: "started", ID: req.ID, Pid: pid})
	}
	go func() {
		ws := <-done
		s.release(req.ID) // a gate never released: close it
		s.mu.Lock()
		delete(s.pgid, req.ID)
		ending := s.ending[req.ID]
		delete(s.ending, req.ID)
		delete(s.set, req.ID)
		s.mu.Unlock()
		switch {
		case ending && set != nil: // everything the command started, wherever it moved
			syscall.Kill(-pid, syscall.SIGKILL) // its group at once, the rest by name
			set.kill()
		case ending:
			killGroup(pid)
		}
		if set != nil {
			set.leave()
		}
		r := Reply{Op: "exited", ID: req.ID, Exit: -1}
		switch {
		case ws.Signaled():
			r.Signal, r.Exit = int(ws.Signal()), 128+int(ws.Signal())
		default:
			r.Exit = ws.ExitStatus()
		}
		s.reply(r)
	}()
}

// releaseAtExec lets a command forked with SysProcAttr.Ptrace, stopped at
// its exec, run: it waits for the stop (the caller holds the reaper's
// lock, so the reaper cannot take it), then detaches. A command that is
// gone meanwhile is the reaper's to find.
func releaseAtExec(pid int) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, wAll|syscall.WUNTRACED, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if ws.Stopped() {
		syscall.PtraceDetach(pid)
	}
}

// lookPath finds name as the command's shell would: as given when it
// holds a slash, else in the PATH of env.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &os.PathError{Op: "exec", Path: name, Err: os.ErrNotExist}
}

const (
	rlimitNproc         = 6  // RLIMIT_NPROC
	prSetDumpable       = 4  // PR_SET_DUMPABLE
	prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER
	sysPidfdOpen        = 434
)

func prctl(op, arg uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, op, arg, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

func pidfdOpen(pid int) (int, error) {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func prlimit(pid, resource int, rl *syscall.Rlimit) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource), uintptr(unsafe.Pointer(rl)), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
