package dockerbackend

// For the external tests: the unexported names they check.
var (
	BaseImage         = baseImage
	ErrForeign        = errForeign
	ErrUnknownRuntime = errUnknownRuntime
)

// RootfsTimeout bounds a debootstrap run.
const RootfsTimeout = rootfsTimeout
