//go:build linux && !amd64 && !arm64

package supervisor

// On another architecture there is no relay (newRelay): commands signal
// as their Landlock domains allow.
var (
	auditArch           uint32 = 0
	sysSeccomp          int32  = -1
	sysKill             int32  = -1
	sysRtSigqueueinfo   int32  = -1
	sysProcessVMReadv   int32  = -1
	sysTkill            int32  = -1
	sysTgkill           int32  = -1
	sysRtTgsigqueueinfo int32  = -1
	sysGetrandom        int32  = -1
	x32Bit              uint32 = 0
)
