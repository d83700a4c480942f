package seccomp

import (
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
)

// These tests run the filter's bytes in golang.org/x/net/bpf's
// interpreter against synthetic struct seccomp_data, for both supported
// architectures, on any OS. The tests in bwrap_linux_test.go run it in the
// kernel.

const (
	wantDeny  = retErrno | errnoEPERM
	wantNosys = retErrno | errnoENOSYS
)

// vm decodes the encoded program (the exact bytes bwrap gets) back into
// instructions and loads them into the interpreter.
func vm(t testing.TB, goarch string, extra []string) *bpf.VM {
	t.Helper()
	ins, err := build(goarch, extra, errnoEPERM, errnoENOSYS)
	require.NoError(t, err)
	return vmOf(t, ins)
}

func vmOf(t testing.TB, ins []bpf.Instruction) *bpf.VM {
	t.Helper()
	b, err := encode(ins)
	require.NoError(t, err)
	require.Zero(t, len(b)%8)
	raw := make([]bpf.RawInstruction, 0, len(b)/8)
	for i := 0; i < len(b); i += 8 {
		raw = append(raw, bpf.RawInstruction{
			Op: binary.LittleEndian.Uint16(b[i:]), Jt: b[i+2], Jf: b[i+3], K: binary.LittleEndian.Uint32(b[i+4:]),
		})
	}
	dis, ok := bpf.Disassemble(raw)
	require.True(t, ok, "the encoded program does not disassemble")
	v, err := bpf.NewVM(dis)
	require.NoError(t, err)
	return v
}

// seccompData lays out struct seccomp_data as a little-endian kernel
// would, for an interpreter that loads words big-endian: each 32-bit word
// is stored big-endian, the low word of each argument first.
func seccompData(nr, auditArch uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], auditArch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[argLo(i):], uint32(a))
		binary.BigEndian.PutUint32(b[argHi(i):], uint32(a>>32))
	}
	return b
}

func run(t testing.TB, v *bpf.VM, nr, auditArch uint32, args ...uint64) uint32 {
	t.Helper()
	var a [6]uint64
	copy(a[:], args)
	out, err := v.Run(seccompData(nr, auditArch, a))
	require.NoError(t, err)
	return uint32(out)
}

func nr(t testing.TB, goarch, name string) uint32 {
	t.Helper()
	n, ok := targets[goarch].info.SyscallNames[name]
	require.True(t, ok, "%s has no %s", goarch, name)
	return uint32(n)
}

var goarches = []string{"amd64", "arm64"}

func TestEveryDefaultDenyIsEPERM(t *testing.T) {
	for _, goarch := range goarches {
		v := vm(t, goarch, nil)
		id := uint32(targets[goarch].info.ID)
		for _, name := range DefaultDeny() {
			n, ok := targets[goarch].info.SyscallNames[name]
			if !ok {
				require.Contains(t, []string{"iopl", "ioperm", "uselib", "ustat", "sysfs", "_sysctl"}, name,
					"%s missing on %s", name, goarch)
				continue
			}
			require.Equal(t, uint32(wantDeny), run(t, v, uint32(n), id), "%s/%s", goarch, name)
		}
	}
}

func TestOrdinaryCallsAreAllowed(t *testing.T) {
	for _, goarch := range goarches {
		v := vm(t, goarch, nil)
		id := uint32(targets[goarch].info.ID)
		for _, name := range []string{"read", "write", "openat", "close", "execve", "mmap", "ptrace",
			"process_vm_readv", "getpid", "wait4", "prlimit64", "setsid", "chdir", "kill", "futex", "memfd_create"} {
			require.Equal(t, uint32(retAllow), run(t, v, nr(t, goarch, name), id, 0xffffffffffffffff, 1, 2), "%s/%s", goarch, name)
		}
	}
}

func TestForeignABIsAreDenied(t *testing.T) {
	// amd64: int 0x80 reports AUDIT_ARCH_I386 and i386 numbers (20 is
	// getpid there, but also lchown on x86_64); arm64: AArch32 tasks.
	foreign := map[string][]*arch.Info{"amd64": {arch.I386, arch.ARM, arch.AARCH64}, "arm64": {arch.ARM, arch.X86_64, arch.I386}}
	for _, goarch := range goarches {
		v := vm(t, goarch, nil)
		for _, other := range foreign[goarch] {
			for _, name := range []string{"getpid", "read", "socket"} {
				n, ok := other.SyscallNames[name]
				if !ok {
					continue
				}
				require.Equal(t, uint32(wantDeny), run(t, v, uint32(n), uint32(other.ID), 1), "%s: %s via %s", goarch, name, other.Name)
			}
		}
	}
	v := vm(t, "amd64", nil)
	getpid := nr(t, "amd64", "getpid")
	require.Equal(t, uint32(wantDeny), run(t, v, x32SyscallBit|getpid, uint32(arch.X86_64.ID)), "x32 getpid")
	require.Equal(t, uint32(wantDeny), run(t, v, 0xffffffff, uint32(arch.X86_64.ID)), "nr -1")
	require.Equal(t, uint32(retAllow), run(t, v, getpid, uint32(arch.X86_64.ID)))
}

func TestSocketFamilies(t *testing.T) {
	allowed := map[uint64]bool{1: true, 2: true, 10: true, 16: true}
	for _, goarch := range goarches {
		v := vm(t, goarch, nil)
		id := uint32(targets[goarch].info.ID)
		for _, call := range []string{"socket", "socketpair"} {
			n := nr(t, goarch, call)
			for family := uint64(0); family < 64; family++ { // AF_MAX is 46
				want := uint32(wantDeny)
				if allowed[family] {
					want = retAllow
				}
				require.Equal(t, want, run(t, v, n, id, family, 1, 0), "%s/%s(%d)", goarch, call, family)
			}
			// The kernel reads an int: AF_UNIX with junk above bit 31
			// is AF_UNIX to it, so the filter must not trust the low half.
			require.Equal(t, uint32(wantDeny), run(t, v, n, id, 1<<32|1), "%s/%s hi bits", goarch, call)
			require.Equal(t, uint32(wantDeny), run(t, v, n, id, 0xffffffff00000002), "%s/%s sign-extended", goarch, call)
			require.Equal(t, uint32(wantDeny), run(t, v, n, id, 40), "%s/%s AF_VSOCK", goarch, call)
		}
	}
}

func TestPersonality(t *testing.T) {
	for _, goarch := range goarches {
		v := vm(t, goarch, nil)
		id := uint32(targets[goarch].info.ID)
		n := nr(t, goarch, "personality")
		for _, p := range []uint64{0, 8, 0x20000, 0x20008, 0xffffffff} {
			require.Equal(t, uint32(retAllow), run(t, v, n, id, p), "%s personality(%#x)", goarch, p)
		}
		for _, p := range []uint64{0x0040000 /* ADDR_NO_RANDOMIZE */, 0x0400000 /* READ_IMPLIES_EXEC */, 0x0100000, /* MMAP_PAGE_ZERO */
			0x4, 0x10, 0x0040008, 1<<32 | 0, 0xffffffffffffffff} {
			require.Equal(t, uint32(wantDeny), run(t, v, n, id, p), "%s personality(%#x)", goarch, p)
		}
	}
}

func TestCloneNamespaceFlags(t *testing.T) {
	const sigchld = 17
	ns := map[string]uint64{"NEWNS": 0x20000, "NEWCGROUP": 0x2000000, "NEWUTS": 0x4000000, "NEWIPC": 0x8000000,
		"NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}
	for _, goarch := range goarches {
		v := vm(t, goarch, nil)
		id := uint32(targets[goarch].info.ID)
		n := nr(t, goarch, "clone")
		for name, flag := range ns {
			require.Equal(t, uint32(wantDeny), run(t, v, n, id, flag|sigchld), "%s clone(CLONE_%s)", goarch, name)
		}
		// fork, vfork-style spawn, pthread_create, Go's newosproc
		for _, flags := range []uint64{sigchld, 0x4100 | sigchld, 0x3d0f00, 0x50f00, 1<<40 | sigchld} {
			require.Equal(t, uint32(retAllow), run(t, v, n, id, flags, 0, 0), "%s clone(%#x)", goarch, flags)
		}
		require.Equal(t, uint32(wantNosys), run(t, v, nr(t, goarch, "clone3"), id, 0, 88), "%s clone3", goarch)
	}
}

func TestExtraDeny(t *testing.T) {
	for _, goarch := range goarches {
		id := uint32(targets[goarch].info.ID)
		v := vm(t, goarch, []string{"ptrace", "socket", "ptrace", "keyctl", "clone3", "iopl"})
		require.Equal(t, uint32(wantDeny), run(t, v, nr(t, goarch, "ptrace"), id))
		// socket listed: no argument check, even AF_UNIX is denied
		require.Equal(t, uint32(wantDeny), run(t, v, nr(t, goarch, "socket"), id, 1))
		// socketpair keeps its check
		require.Equal(t, uint32(retAllow), run(t, v, nr(t, goarch, "socketpair"), id, 1))
		require.Equal(t, uint32(wantNosys), run(t, v, nr(t, goarch, "clone3"), id))
		require.Equal(t, uint32(retAllow), run(t, v, nr(t, goarch, "getpid"), id))
	}
}

func TestMarkerErrno(t *testing.T) {
	ins, err := build("amd64", nil, 133, 134)
	require.NoError(t, err)
	v := vmOf(t, ins)
	id := uint32(arch.X86_64.ID)
	require.Equal(t, uint32(retErrno|133), run(t, v, nr(t, "amd64", "keyctl"), id))
	require.Equal(t, uint32(retErrno|133), run(t, v, 20, uint32(arch.I386.ID)))
	require.Equal(t, uint32(retErrno|134), run(t, v, nr(t, "amd64", "clone3"), id))
}

func TestValidateErrors(t *testing.T) {
	err := Validate([]string{"ptrace", "foo"})
	require.ErrorIs(t, err, ErrUnknownSyscall)
	require.EqualError(t, err, `seccomp: unknown syscall "foo" in sandbox.local.seccomp.deny; names are as in syscalls(2), e.g. "ptrace"`)

	require.EqualError(t, Validate([]string{""}), `seccomp: empty syscall name in sandbox.local.seccomp.deny; names are as in syscalls(2), e.g. "ptrace"`)
	require.ErrorIs(t, Validate([]string{"PTRACE"}), ErrUnknownSyscall, "names are case-sensitive, as in the kernel")
	require.ErrorIs(t, Validate([]string{" ptrace"}), ErrUnknownSyscall)

	long := strings.Repeat("a", 10000)
	err = Validate([]string{long})
	require.ErrorIs(t, err, ErrUnknownSyscall)
	require.Less(t, len(err.Error()), 300, "the error must not echo unbounded input")

	require.EqualError(t, Validate([]string{"exit_group"}),
		`seccomp: syscall "exit_group" in sandbox.local.seccomp.deny cannot be denied (processes could not end); remove it from the list`)
	require.ErrorContains(t, Validate(make([]string, maxNames+1)), "at most 512")

	// Names of either supported architecture are valid everywhere, so one
	// config serves x86_64 and arm64 hosts.
	require.NoError(t, Validate([]string{"iopl", "renameat2", "ptrace", "process_vm_writev"}))
	require.NoError(t, Validate(nil))
}

func TestProgramErrors(t *testing.T) {
	_, err := build("riscv64", nil, errnoEPERM, errnoENOSYS)
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "riscv64")

	_, err = Program(Options{ExtraDeny: []string{"foo"}})
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		require.ErrorIs(t, err, ErrUnknownSyscall)
		prog, err := Program(Options{})
		require.NoError(t, err)
		require.Zero(t, len(prog)%8)
		require.Less(t, len(prog)/8, maxInstructions)
	} else {
		require.ErrorIs(t, err, ErrUnsupported)
	}
}

func TestDefaultDenyIsACopy(t *testing.T) {
	a := DefaultDeny()
	require.True(t, slices.IsSorted(a))
	a[0] = "changed"
	require.NotEqual(t, "changed", DefaultDeny()[0])
	for _, n := range DefaultDeny() {
		require.NoError(t, Validate([]string{n}), n)
	}
}

func TestLongestPossibleFilterFits(t *testing.T) {
	// Every syscall of the architecture denied: still within the kernel's
	// instruction limit, and essential ones excluded by Validate.
	for _, goarch := range goarches {
		var all []string
		for name := range targets[goarch].info.SyscallNames {
			if _, ess := essential[name]; !ess {
				all = append(all, name)
			}
		}
		ins, err := build(goarch, all, errnoEPERM, errnoENOSYS)
		require.NoError(t, err)
		require.LessOrEqual(t, len(ins), maxInstructions)
		v := vmOf(t, ins)
		require.Equal(t, uint32(retAllow), run(t, v, nr(t, goarch, "execve"), uint32(targets[goarch].info.ID)))
		require.Equal(t, uint32(wantDeny), run(t, v, nr(t, goarch, "read"), uint32(targets[goarch].info.ID)))
	}
}

// No set-user-ID or set-group-ID file can be made: chmod and friends with
// those bits, and open/openat creating a file with them, are denied; the
// same calls without them, and open without O_CREAT whatever its mode
// register holds, are allowed. openat2 (its mode is in memory) says
// ENOSYS.
func TestNoSetIDFiles(t *testing.T) {
	for _, goarch := range goarches {
		v := vm(t, goarch, nil)
		id := uint32(targets[goarch].info.ID)
		call := func(name string, args ...uint64) (uint32, bool) {
			n, ok := targets[goarch].info.SyscallNames[name]
			if !ok {
				return 0, false
			}
			return run(t, v, uint32(n), id, args...), true
		}
		for _, c := range []struct {
			name string
			args []uint64
			want uint32
		}{
			{"chmod", []uint64{0, 0o4755}, wantDeny}, {"chmod", []uint64{0, 0o2755}, wantDeny}, {"chmod", []uint64{0, 0o755}, retAllow},
			{"fchmod", []uint64{3, 0o6755}, wantDeny}, {"fchmod", []uint64{3, 0o1777}, retAllow},
			{"fchmodat", []uint64{3, 0, 0o4700, 0}, wantDeny}, {"fchmodat", []uint64{3, 0, 0o700, 0}, retAllow},
			{"fchmodat2", []uint64{3, 0, 0o4700, 0}, wantDeny},
			{"creat", []uint64{0, 0o4755}, wantDeny}, {"creat", []uint64{0, 0o644}, retAllow},
			{"mknodat", []uint64{3, 0, 0o104755, 0}, wantDeny},
			{"open", []uint64{0, 0o100, 0o4755}, wantDeny}, {"open", []uint64{0, 0o100, 0o644}, retAllow},
			{"open", []uint64{0, 0, 0o4755}, retAllow}, // no O_CREAT: the mode register means nothing
			{"openat", []uint64{3, 0, 0o101, 0o2755}, wantDeny}, {"openat", []uint64{3, 0, 0o20200002, 0o4700}, wantDeny},
			{"openat", []uint64{3, 0, 0o101, 0o644}, retAllow}, {"openat", []uint64{3, 0, 0, 0o6777}, retAllow},
			{"openat2", []uint64{3, 0, 0, 24}, wantNosys},
		} {
			if got, ok := call(c.name, c.args...); ok {
				require.Equal(t, c.want, got, "%s %s%o", goarch, c.name, c.args)
			}
		}
	}
}
