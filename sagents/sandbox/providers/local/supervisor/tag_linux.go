package supervisor

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Under gVisor there is no Landlock (domain_linux.go). There, each
// command's processes carry a supplementary group of their own instead,
// a tag: the supervisor, which alone holds CAP_SETGID (given by the
// runsc spec, see keepCapsToSelf), forks each command with that one extra group, and a
// process without CAP_SETGID can neither drop nor change its groups, nor
// keep the capability across its exec (it is in no inheritable or
// ambient set of the commands). A command's end then reaches every
// process that carries its tag, wherever it moved (setsid, setpgid,
// double forks), found in /proc/PID/status. The group grants nothing:
// no file belongs to it, and files are created with the process's own
// gid.

// tagBase is the first tag group; command n's is tagBase + n mod 2^24.
const tagBase = 0x7e000000

// tag is one command's group tag.
type tag struct{ gid uint32 }

func tagOf(id uint64) tag { return tag{gid: tagBase + uint32(id&0xffffff)} }

// credential forks a command with its tag as its only extra group.
func (g tag) credential() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Groups: []uint32{g.gid}}
}

// signal sends sig to every live process that carries the tag.
func (g tag) signal(sig syscall.Signal) {
	for _, pid := range g.pids() {
		syscall.Kill(pid, sig)
	}
}

// kill sends SIGKILL to the tag's processes until none is left alive,
// for at most about two seconds, as domain.kill.
func (g tag) kill() {
	for range 1000 {
		pids := g.pids()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		syscall.Nanosleep(&syscall.Timespec{Nsec: 2e6}, nil)
	}
}

func (g tag) leave() {}

// pids lists the live processes whose groups hold the tag.
func (g tag) pids() []int {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	want := strconv.FormatUint(uint64(g.gid), 10)
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/status")
		if err != nil {
			continue
		}
		live, tagged := true, false
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok {
				v = strings.TrimSpace(v)
				live = !strings.HasPrefix(v, "Z") && !strings.HasPrefix(v, "X")
			}
			if v, ok := strings.CutPrefix(line, "Groups:"); ok {
				for _, gid := range strings.Fields(v) {
					tagged = tagged || gid == want
				}
			}
		}
		if live && tagged {
			out = append(out, pid)
		}
	}
	return out
}

// Capability calls (linux/capability.h).
const (
	linuxCapabilityVersion3 = 0x20080522
	capSetgid               = 6
)

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct{ effective, permitted, inheritable uint32 }

// keepCapsToSelf leaves this process's capabilities (given by the runsc
// spec: CAP_SETGID for the tags, CAP_SYS_RESOURCE so that a fork bomb of
// the commands, whose uid it shares, cannot keep it from making the
// threads it needs: RLIMIT_NPROC) in its effective and permitted sets
// only: out of its inheritable set, which takes them out of its ambient
// set too, so no command keeps one across its exec. It reports whether
// this process may set a command's groups.
func keepCapsToSelf() bool {
	h := capHeader{version: linuxCapabilityVersion3}
	var d [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d[0])), 0); e != 0 {
		return false
	}
	for i := range d {
		d[i].inheritable = 0
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d[0])), 0); e != 0 {
		return false
	}
	const bit = 1 << capSetgid
	return d[0].effective&bit != 0 && d[0].permitted&bit != 0
}
