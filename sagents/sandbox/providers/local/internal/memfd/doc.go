// Package memfd makes the sealed in-memory files through which local mode
// hands bubblewrap its arguments and its seccomp filter.
package memfd
