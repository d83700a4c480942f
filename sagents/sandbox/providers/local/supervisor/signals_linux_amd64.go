package supervisor

// The relay's system calls on amd64 (its filter, signals_linux.go).
const (
	auditArch         = 0xc000003e // AUDIT_ARCH_X86_64
	sysSeccomp        = 317
	sysKill           = 62
	sysRtSigqueueinfo = 129
	sysProcessVMReadv = 310
)

// More of them, and the x32 ABI's bit (refused).
const (
	sysTkill            = 200
	sysTgkill           = 234
	sysRtTgsigqueueinfo = 297
	sysGetrandom        = 318
	x32Bit              = 0x40000000
)
