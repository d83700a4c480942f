package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/internal/testenv"
)

// runFilter runs a classic BPF program the way seccomp does, over one
// struct seccomp_data, and returns its action.
func runFilter(t *testing.T, prog []sockFilter, nr int32, arch uint32, args [6]uint64) uint32 {
	t.Helper()
	word := func(off uint32) uint32 {
		switch {
		case off == 0:
			return uint32(nr)
		case off == 4:
			return arch
		case off >= 16 && off < 64 && off%4 == 0:
			a := args[(off-16)/8]
			if (off-16)%8 == 4 {
				return uint32(a >> 32)
			}
			return uint32(a)
		}
		t.Fatalf("load at %d", off)
		return 0
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.code {
		case bpfLdWAbs:
			acc = word(in.k)
		case bpfJeqK, bpfJgeK:
			taken := acc == in.k
			if in.code == bpfJgeK {
				taken = acc >= in.k
			}
			if taken {
				pc += int(in.jt)
			} else {
				pc += int(in.jf)
			}
		case bpfRetK:
			return in.k
		default:
			t.Fatalf("instruction %d: code %#x", pc, in.code)
		}
	}
	t.Fatal("the program fell off its end")
	return 0
}

// The relay's filter, call by call: what the supervisor answers, what the
// kernel does, what is refused at once.
func TestRelayFilter(t *testing.T) {
	const self, marker = 2, 0x1122334455667788
	prog := relayFilter(self, marker)
	eperm := uint32(seccompRetErrno | uint32(syscall.EPERM))
	for _, tc := range []struct {
		name string
		nr   int32
		arch uint32
		args [6]uint64
		want uint32
	}{
		{"kill", sysKill, auditArch, [6]uint64{42, 15}, seccompRetUserNotif},
		{"kill with the marker: the domain's own", sysKill, auditArch, [6]uint64{^uint64(0), 9, marker}, seccompRetAllow},
		{"kill with half the marker", sysKill, auditArch, [6]uint64{^uint64(0), 9, marker & 0xffffffff}, seccompRetUserNotif},
		{"kill with the other half", sysKill, auditArch, [6]uint64{^uint64(0), 9, marker &^ 0xffffffff}, seccompRetUserNotif},
		{"rt_sigqueueinfo", sysRtSigqueueinfo, auditArch, [6]uint64{42, 10, 0x1000}, seccompRetUserNotif},
		{"pidfd_send_signal", sysPidfdSendSig, auditArch, [6]uint64{3, 15}, seccompRetUserNotif},
		{"tkill", sysTkill, auditArch, [6]uint64{42, 15}, seccompRetUserNotif},
		{"tgkill of another process", sysTgkill, auditArch, [6]uint64{42, 43, 15}, seccompRetAllow},
		{"tgkill of pid 1", sysTgkill, auditArch, [6]uint64{1, 9, 15}, eperm},
		{"tgkill of the supervisor", sysTgkill, auditArch, [6]uint64{self, 9, 15}, eperm},
		{"tgkill of the supervisor, high bits set", sysTgkill, auditArch, [6]uint64{1<<32 | self, 9, 15}, eperm},
		{"rt_tgsigqueueinfo of pid 1", sysRtTgsigqueueinfo, auditArch, [6]uint64{1, 9, 15}, eperm},
		{"rt_tgsigqueueinfo of another process", sysRtTgsigqueueinfo, auditArch, [6]uint64{42, 42, 15}, seccompRetAllow},
		{"getpid", int32(syscall.SYS_GETPID), auditArch, [6]uint64{}, seccompRetAllow},
		{"another ABI", sysKill, 0x40000003 /* AUDIT_ARCH_I386 */, [6]uint64{1, 15}, eperm},
	} {
		if got := runFilter(t, prog, tc.nr, tc.arch, tc.args); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
	if x32Bit != 0 {
		if got := runFilter(t, prog, int32(x32Bit|sysKill), auditArch, [6]uint64{1, 15}); got != eperm {
			t.Errorf("x32 kill: %#x, want EPERM", got)
		}
	}
}

// The relay's own system call numbers are the kernel's.
func TestRelaySyscallNumbers(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no relay on " + runtime.GOARCH)
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"seccomp", int(sysSeccomp), unix.SYS_SECCOMP}, {"kill", int(sysKill), unix.SYS_KILL},
		{"rt_sigqueueinfo", int(sysRtSigqueueinfo), unix.SYS_RT_SIGQUEUEINFO},
		{"process_vm_readv", int(sysProcessVMReadv), unix.SYS_PROCESS_VM_READV},
		{"tkill", int(sysTkill), unix.SYS_TKILL}, {"tgkill", int(sysTgkill), unix.SYS_TGKILL},
		{"rt_tgsigqueueinfo", int(sysRtTgsigqueueinfo), unix.SYS_RT_TGSIGQUEUEINFO},
		{"getrandom", int(sysGetrandom), unix.SYS_GETRANDOM},
		{"pidfd_send_signal", sysPidfdSendSig, unix.SYS_PIDFD_SEND_SIGNAL}, {"pidfd_getfd", sysPidfdGetfd, unix.SYS_PIDFD_GETFD},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	if ioctlNotifRecv != unix.SECCOMP_IOCTL_NOTIF_RECV || ioctlNotifSend != unix.SECCOMP_IOCTL_NOTIF_SEND ||
		ioctlNotifIDValid != unix.SECCOMP_IOCTL_NOTIF_ID_VALID {
		t.Error("the notification ioctls are not the kernel's")
	}
}

func TestParseStatusAndPidfdInfo(t *testing.T) {
	st, ok := readStatus(os.Getpid())
	if !ok || st.tgid != os.Getpid() || st.nested {
		t.Errorf("own status: %+v %v", st, ok)
	}
	if _, ok := readStatus(-5); ok {
		t.Error("status of pid -5")
	}
	pfd, err := pidfdOpen(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(pfd)
	if pid, _, ok := pidfdInfo(pfd); !ok || pid != os.Getpid() {
		t.Errorf("own pidfd: %d %v", pid, ok)
	}
	if _, _, ok := pidfdInfo(0); ok {
		t.Error("stdin read as a pidfd")
	}
	if st, ok := parseStatus([]byte("Name:\tx\nTgid:\t7\nNSpid:\t7\t1\n")); !ok || st.tgid != 7 || !st.nested {
		t.Errorf("nested: %+v %v", st, ok)
	}
	if pid, flags, ok := parsePidfdInfo([]byte("pos:\t0\nflags:\t02000200\nPid:\t-1\n")); !ok || pid != -1 || flags != 0o2000200 {
		t.Errorf("exited thread pidfd: %d %o %v", pid, flags, ok)
	}
}

// What the relay reads of /proc never makes it panic, and a status is
// ok only with a positive Tgid.
func FuzzParseStatus(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("Tgid:\t-3\nNSpid:\n"))
	f.Add([]byte("Pid:\t12\nflags:\t0777777777777777777777\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, ok := parseStatus(b); ok && st.tgid <= 0 {
			t.Errorf("ok with tgid %d", st.tgid)
		}
		parsePidfdInfo(b)
	})
}

// requireRelay fails where the kernel has no Landlock signal scopes.
func requireRelay(t *testing.T) int {
	t.Helper()
	if LandlockABI() < LandlockSignalABI {
		testenv.Missing(t, fmt.Sprintf("Landlock ABI %d (Linux 6.12+)", LandlockSignalABI), "run on Linux 6.12 or later")
	}
	rules := newRuleset()
	if rules < 0 {
		t.Fatal("no ruleset")
	}
	t.Cleanup(func() { syscall.Close(rules) })
	return rules
}

// inDomain runs the shell script in a new domain of rules (under r's
// filter when r is not nil) and returns its output and exit status.
func inDomain(t *testing.T, rules int, r *relay, script string) (string, int) {
	t.Helper()
	d, err := enterDomain(rules, r)
	if err != nil {
		t.Fatal(err)
	}
	defer d.leave()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var pid int
	d.run(func() {
		pid, err = syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{
			Files: []uintptr{0, out.Fd(), out.Fd()}, Sys: &syscall.SysProcAttr{Setpgid: true}})
	})
	if err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	b, _ := os.ReadFile(out.Name())
	return string(b), ws.ExitStatus()
}

// The relay in this process, without a sandbox: a command in a domain
// signals a process outside it (kill -0, kill, a trapped signal
// delivered), and not this process (the supervisor here), nor any of its
// threads (by kill, and the domain's own thread by tgkill through the
// kernel), nor pid 1. Control: without the relay the first fails
// (EPERM: Landlock), which proves the command runs in its domain.
func TestRelayInProcess(t *testing.T) {
	rules := requireRelay(t)
	r := newRelay(true)
	if r == nil {
		t.Skip("no relay on " + runtime.GOARCH)
	}
	victim, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Wait()
	defer victim.Kill()
	v := strconv.Itoa(victim.Pid)

	out, code := inDomain(t, rules, nil, "kill -0 "+v)
	if code == 0 {
		t.Fatalf("control: without the relay the command signalled a process outside its domain: %s", out)
	}
	out, code = inDomain(t, rules, r, "kill -0 "+v+" && echo reached")
	if code != 0 || !strings.Contains(out, "reached") {
		t.Errorf("kill -0 through the relay: %d %s", code, out)
	}
	// Every thread of this process, the domain's own among them (the
	// shell's grandparent thread: it forked the shell).
	tids, _ := os.ReadDir("/proc/self/task")
	var script strings.Builder
	for _, sig := range []string{"0", "CONT", "STOP", "TERM", "USR1"} {
		for _, tid := range tids {
			fmt.Fprintf(&script, "kill -s %s %s 2>/dev/null && echo HIT kill %s %s\n", sig, tid.Name(), sig, tid.Name())
		}
		fmt.Fprintf(&script, "kill -s %s 1 2>/dev/null && echo HIT kill %s 1\n", sig, sig)
	}
	// Every thread, the domain's own among them, by tgkill and tkill.
	script.WriteString(`python3 -c 'import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
sup = int(sys.argv[1])
tids = os.listdir("/proc/%d/task" % sup)
opened = 0
for tid in tids:
    for sig in (0, 18, 10, 15):
        if libc.syscall(234, sup, int(tid), sig) == 0 or libc.syscall(200, int(tid), sig) == 0:
            print("HIT thread", tid, sig)
        for flags in (0, 1, 2, 4):  # PIDFD_SIGNAL_THREAD, _THREAD_GROUP, _PROCESS_GROUP
            try:
                fd = os.pidfd_open(int(tid), os.O_EXCL)  # PIDFD_THREAD
            except OSError:
                continue
            opened += 1
            try:
                signal.pidfd_send_signal(fd, sig, None, flags); print("HIT thread pidfd", tid, sig, flags)
            except OSError:
                pass
            os.close(fd)
print("threads", len(tids), "pidfds", opened)
' ` + strconv.Itoa(os.Getpid()) + ` 2>&1 || true
echo done`)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Missing(t, "python3", "apt-get install python3")
	}
	out, _ = inDomain(t, rules, r, script.String())
	if strings.Contains(out, "HIT") || !strings.Contains(out, "done") || !strings.Contains(out, "threads ") || strings.Contains(out, "pidfds 0\n") {
		t.Errorf("a command signalled the supervisor, one of its threads or pid 1:\n%s", out)
	}
	// Delivery, not only the check: SIGKILL through the relay ends it.
	out, code = inDomain(t, rules, r, "kill -KILL "+v)
	if code != 0 {
		t.Errorf("kill -KILL: %d %s", code, out)
	}
	done := make(chan *os.ProcessState, 1)
	go func() { st, _ := victim.Wait(); done <- st }()
	select {
	case st := <-done:
		if ws := st.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGKILL {
			t.Errorf("the victim ended with %v", st)
		}
	case <-time.After(10 * time.Second):
		t.Error("the victim outlived the relayed SIGKILL")
	}
}
