package supervisor

// The relay's system calls on arm64 (its filter, signals_linux.go).
const (
	auditArch         = 0xc00000b7 // AUDIT_ARCH_AARCH64
	sysSeccomp        = 277
	sysKill           = 129
	sysRtSigqueueinfo = 138
	sysProcessVMReadv = 270
)

// More of them; arm64 has no x32 ABI.
const (
	sysTkill            = 130
	sysTgkill           = 131
	sysRtTgsigqueueinfo = 240
	sysGetrandom        = 278
	x32Bit              = 0
)
