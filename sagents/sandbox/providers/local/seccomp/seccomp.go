package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// ConfigKey is the configuration key that holds Options.ExtraDeny; errors
// about bad names point at it.
const ConfigKey = "sandbox.local.seccomp.deny"

var (
	// ErrUnknownSyscall is wrapped by the error for a name that is not a
	// Linux system call on any supported architecture.
	ErrUnknownSyscall = errors.New("unknown syscall")
	// ErrUnsupported is wrapped by the error for a GOOS or GOARCH the
	// filter cannot be built for.
	ErrUnsupported = errors.New("seccomp filter unsupported")
)

// Options tunes the filter.
type Options struct {
	// ExtraDeny names more system calls (as in syscalls(2), e.g. "ptrace")
	// that fail with EPERM, on top of DefaultDeny. A name that exists on
	// another supported architecture but not on the running one is
	// skipped there (the call does not exist, so nothing can make it).
	// Listing socket, socketpair, personality or clone denies it whatever
	// its arguments; clone3 is always refused (ENOSYS) and listing it
	// changes nothing. Duplicates are fine. See Validate for the names
	// that are refused.
	ExtraDeny []string
}

// Limits on outside input (the configured names).
const (
	maxNames   = 512 // more than there are system calls
	maxNameLen = 64  // the longest Linux syscall name has 23 bytes
)

// Values of struct seccomp_data's fields and of filter return values
// (linux/seccomp.h, linux/audit.h), spelled out so the package builds on
// every GOOS.
const (
	retAllow = 0x7fff0000 // SECCOMP_RET_ALLOW
	retErrno = 0x00050000 // SECCOMP_RET_ERRNO | errno

	errnoEPERM  = 1
	errnoENOSYS = 38

	offNr   = 0  // int nr
	offArch = 4  // __u32 arch
	offArgs = 16 // __u64 args[6]

	x32SyscallBit = 0x40000000 // __X32_SYSCALL_BIT

	maxInstructions = 4096 // BPF_MAXINSNS
)

// DefaultDeny returns the system calls the filter fails with EPERM
// whatever their arguments, sorted. Names that do not exist on the running
// architecture (iopl and ioperm outside x86) are listed but not in the
// filter. The argument checks (socket, socketpair, personality, clone) and
// clone3 (ENOSYS) are described in the package documentation.
func DefaultDeny() []string {
	names := make([]string, 0, len(denyRules))
	for _, r := range denyRules {
		names = append(names, r.name)
	}
	slices.Sort(names)
	return names
}

// Validate checks names meant for Options.ExtraDeny: each must be a Linux
// system call on a supported architecture and must not be one every
// command needs. The error names the first bad entry and the fix.
func Validate(names []string) error {
	if len(names) > maxNames {
		return fmt.Errorf("seccomp: %d names in %s, at most %d allowed; list each system call once", len(names), ConfigKey, maxNames)
	}
	for _, n := range names {
		if err := validateName(n); err != nil {
			return err
		}
	}
	return nil
}

func validateName(n string) error {
	if n == "" {
		return fmt.Errorf("seccomp: empty syscall name in %s; names are as in syscalls(2), e.g. \"ptrace\"", ConfigKey)
	}
	known := len(n) <= maxNameLen
	if known {
		_, onAMD64 := arch.X86_64.SyscallNames[n]
		_, onARM64 := arch.AARCH64.SyscallNames[n]
		known = onAMD64 || onARM64
	}
	if !known {
		shown := n
		if len(shown) > maxNameLen {
			shown = shown[:maxNameLen] + "..."
		}
		return fmt.Errorf("seccomp: %w %q in %s; names are as in syscalls(2), e.g. \"ptrace\"", ErrUnknownSyscall, shown, ConfigKey)
	}
	if why, ok := essential[n]; ok {
		return fmt.Errorf("seccomp: syscall %q in %s cannot be denied (%s); remove it from the list", n, ConfigKey, why)
	}
	return nil
}

// Program returns the filter for the running architecture, ready for
// bwrap --seccomp FD: an array of struct sock_filter (8 bytes each, in
// the machine's byte order). Every syscall not denied is allowed. Its
// error names the bad input: an unknown or essential name in
// opts.ExtraDeny, or an unsupported GOOS/GOARCH.
func Program(opts Options) ([]byte, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("seccomp: %w on %s: the filter is for bwrap on Linux", ErrUnsupported, runtime.GOOS)
	}
	ins, err := build(runtime.GOARCH, opts.ExtraDeny, errnoEPERM, errnoENOSYS)
	if err != nil {
		return nil, err
	}
	return encode(ins)
}

// build assembles the filter for goarch. denyErrno is what denied calls
// (and foreign ABIs) get, nosysErrno what clone3 gets; tests pass an
// unusual errno to tell the filter's answers from the kernel's.
func build(goarch string, extra []string, denyErrno, nosysErrno uint32) ([]bpf.Instruction, error) {
	t, ok := targets[goarch]
	if !ok {
		return nil, fmt.Errorf("seccomp: %w: GOARCH %s has no syscall table (supported: amd64, arm64); run local mode on one of those", ErrUnsupported, goarch)
	}
	if err := Validate(extra); err != nil {
		return nil, err
	}
	deny := retErrno | denyErrno&0xffff
	nosys := retErrno | nosysErrno&0xffff

	// Unconditional denies: the defaults, then the extra names, each
	// once, skipping names this architecture does not have.
	var nrs []uint32
	seen := map[string]bool{}
	unconditional := map[string]bool{}
	add := func(name string) {
		if seen[name] || name == "clone3" {
			return // clone3 is always refused, with ENOSYS
		}
		seen[name] = true
		if nr, ok := t.info.SyscallNames[name]; ok {
			nrs = append(nrs, uint32(nr))
			unconditional[name] = true
		}
	}
	for _, r := range denyRules {
		add(r.name)
	}
	for _, n := range extra {
		add(n)
	}

	// The architecture first: a syscall made through another ABI (int
	// 0x80 on x86_64, AArch32 on arm64) has other numbers, which the
	// checks below would misread, so it is refused outright.
	ins := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(t.info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: deny},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if t.x32 {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: deny})
	}
	// Each check keeps the number in A: "jeq NR; ret deny" pairs, and
	// blocks that load arguments always end in a return.
	for _, nr := range nrs {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1},
			bpf.RetConstant{Val: deny})
	}
	block := func(name string, body []bpf.Instruction) {
		if unconditional[name] {
			return
		}
		nr, ok := t.info.SyscallNames[name]
		if !ok {
			return
		}
		ins = append(ins, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: uint8(len(body))})
		ins = append(ins, body...)
	}
	block("socket", allowOnly(0, allowedFamilies, deny))
	block("socketpair", allowOnly(0, allowedFamilies, deny))
	block("personality", allowOnly(0, allowedPersonalities, deny))
	block("clone", []bpf.Instruction{
		// clone() reads only the low 32 bits of its flags.
		bpf.LoadAbsolute{Off: argLo(t.cloneFlags), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaceFlags, SkipFalse: 1},
		bpf.RetConstant{Val: deny},
		bpf.RetConstant{Val: retAllow},
	})
	// No set-user-ID or set-group-ID file: one left in the workspace (or a
	// read-write mount) would run as the sandbox's host uid for any local
	// user who reaches it. The mode argument of every call that sets a
	// file's mode, and of open/openat when they create a file.
	for _, r := range []struct {
		name string
		arg  int
	}{{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}, {"creat", 1}, {"mknod", 1}, {"mknodat", 2}} {
		block(r.name, denyBits(r.arg, setIDBits, deny))
	}
	block("open", denyBitsWhenCreating(1, 2, deny))
	block("openat", denyBitsWhenCreating(2, 3, deny))
	// openat2 passes its mode in memory: ENOSYS makes callers fall back to
	// openat, whose mode is checked above.
	if nr, ok := t.info.SyscallNames["openat2"]; ok && !unconditional["openat2"] {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			bpf.RetConstant{Val: nosys})
	}
	// clone3 passes its flags in memory, which a filter cannot read:
	// ENOSYS makes glibc (2.34+), Go and others fall back to clone, whose
	// flags are checked above. This is what Docker does.
	if nr, ok := t.info.SyscallNames["clone3"]; ok {
		ins = append(ins,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			bpf.RetConstant{Val: nosys})
	}
	ins = append(ins, bpf.RetConstant{Val: retAllow})
	if len(ins) > maxInstructions {
		return nil, fmt.Errorf("seccomp: filter has %d instructions, the kernel takes at most %d; shorten %s", len(ins), maxInstructions, ConfigKey)
	}
	return ins, nil
}

// allowOnly is the body of a block that allows the call when the 64-bit
// argument arg equals one of values and denies it otherwise. The upper
// half must be zero: these arguments are 32-bit in the kernel, which
// ignores the upper half, so a value with junk above bit 31 is denied
// rather than compared on its lower half alone.
func allowOnly(arg int, values []uint32, deny uint32) []bpf.Instruction {
	n := len(values)
	out := []bpf.Instruction{
		bpf.LoadAbsolute{Off: argHi(arg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: uint8(n + 1)},
		bpf.LoadAbsolute{Off: argLo(arg), Size: 4},
	}
	for i, v := range values {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - i)})
	}
	return append(out, bpf.RetConstant{Val: deny}, bpf.RetConstant{Val: retAllow})
}

// setIDBits are S_ISUID and S_ISGID; createFlags are O_CREAT and
// __O_TMPFILE (the same on amd64 and arm64).
const (
	setIDBits   = 0o6000
	createFlags = 0o100 | 0o20000000
)

// denyBits is the body of a block that denies the call when the mode in
// arg has any of bits set.
func denyBits(arg int, bits, deny uint32) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(arg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: bits, SkipFalse: 1},
		bpf.RetConstant{Val: deny},
		bpf.RetConstant{Val: retAllow},
	}
}

// denyBitsWhenCreating is denyBits for open and openat: the mode counts
// only when the flags create a file (without O_CREAT the mode register
// may hold anything).
func denyBitsWhenCreating(flagsArg, modeArg int, deny uint32) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLo(flagsArg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: createFlags, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		bpf.LoadAbsolute{Off: argLo(modeArg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setIDBits, SkipFalse: 1},
		bpf.RetConstant{Val: deny},
		bpf.RetConstant{Val: retAllow},
	}
}

// argLo and argHi are the offsets of the halves of a 64-bit argument in
// struct seccomp_data on a little-endian machine (both supported targets
// are).
func argLo(i int) uint32 { return offArgs + 8*uint32(i) }
func argHi(i int) uint32 { return offArgs + 8*uint32(i) + 4 }

// encode turns instructions into the bytes of struct sock_filter[]:
// u16 code, u8 jt, u8 jf, u32 k, little-endian like the targets.
func encode(ins []bpf.Instruction) ([]byte, error) {
	raw, err := bpf.Assemble(ins)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling the filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.LittleEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.LittleEndian.AppendUint32(out, r.K)
	}
	return out, nil
}
