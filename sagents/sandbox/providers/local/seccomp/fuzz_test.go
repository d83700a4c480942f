package seccomp

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// model is the filter's meaning written as plain Go, independently of the
// BPF: the fuzz target checks the assembled program against it.
func model(goarch string, extra []string, nr, auditArch uint32, args [6]uint64) uint32 {
	t := targets[goarch]
	if auditArch != uint32(t.info.ID) || (t.x32 && nr >= x32SyscallBit) {
		return wantDeny
	}
	name, ok := t.info.SyscallNumbers[int(nr)]
	if !ok {
		return retAllow
	}
	if name == "clone3" || name == "openat2" && !slices.Contains(extra, name) {
		return wantNosys
	}
	if slices.Contains(DefaultDeny(), name) || slices.Contains(extra, name) {
		return wantDeny
	}
	switch name {
	case "socket", "socketpair":
		if args[0]>>32 != 0 || !slices.Contains(allowedFamilies, uint32(args[0])) {
			return wantDeny
		}
	case "personality":
		if args[0]>>32 != 0 || !slices.Contains(allowedPersonalities, uint32(args[0])) {
			return wantDeny
		}
	case "clone":
		if uint32(args[0])&cloneNamespaceFlags != 0 {
			return wantDeny
		}
	case "chmod", "fchmod", "creat", "mknod":
		if uint32(args[1])&setIDBits != 0 {
			return wantDeny
		}
	case "fchmodat", "fchmodat2", "mknodat":
		if uint32(args[2])&setIDBits != 0 {
			return wantDeny
		}
	case "open":
		if uint32(args[1])&createFlags != 0 && uint32(args[2])&setIDBits != 0 {
			return wantDeny
		}
	case "openat":
		if uint32(args[2])&createFlags != 0 && uint32(args[3])&setIDBits != 0 {
			return wantDeny
		}
	}
	return retAllow
}

// FuzzFilter feeds configured names (outside input) to Validate and, when
// they pass, checks the program built from them against the model for a
// syscall drawn from the fuzzer.
func FuzzFilter(f *testing.F) {
	f.Add("ptrace", uint16(101), uint64(0), false, uint8(0))
	f.Add("socket,foo", uint16(41), uint64(40), true, uint8(1))
	f.Add("", uint16(135), uint64(0x40000), false, uint8(2))
	f.Add("iopl,clone", uint16(56), uint64(0x10000011), false, uint8(0))
	f.Add("exit_group", uint16(60), uint64(0), false, uint8(0))
	f.Fuzz(func(t *testing.T, names string, nr uint16, arg0 uint64, x32 bool, archSel uint8) {
		var extra []string
		if names != "" {
			extra = strings.Split(names, ",")
		}
		verr := Validate(extra)
		for _, goarch := range goarches {
			ins, err := build(goarch, extra, errnoEPERM, errnoENOSYS)
			if verr != nil {
				require.EqualError(t, err, verr.Error())
				require.Less(t, len(err.Error()), 400)
				continue
			}
			require.NoError(t, err)
			require.LessOrEqual(t, len(ins), maxInstructions)
			v := vmOf(t, ins)
			n := uint32(nr)
			if x32 {
				n |= x32SyscallBit
			}
			id := uint32(targets[goarch].info.ID)
			switch archSel % 3 {
			case 1:
				id = uint32(targets["amd64"].info.ID) ^ uint32(targets["arm64"].info.ID) ^ id // the other one
			case 2:
				id = 0x40000003 // i386
			}
			args := [6]uint64{arg0, arg0 >> 7, 0, 0, 0, 0}
			out, err := v.Run(seccompData(n, id, args))
			require.NoError(t, err)
			require.Equal(t, model(goarch, extra, n, id, args), uint32(out), "%s nr %d arch %#x arg0 %#x extra %q", goarch, n, id, arg0, extra)
		}
	})
}
