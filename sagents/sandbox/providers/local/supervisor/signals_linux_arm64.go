package supervisor

// The relay's system calls on arm64 (its filter, signals_linux.go).
const (
	auditArch         = 0xc00000b7 // AUDIT_ARCH_AARCH64
	sysSeccomp        = 277
	sysKill           = 129
	sysRtSigqueueinfo = 138
	sysProcessVMReadv = 270
)
